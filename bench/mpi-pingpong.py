#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""An MPI ping-pong between ranks 0 and 1 with every payload checked.

    mpirun -np 2 ... bench/mpi-pingpong.py [ROUND_TRIPS [OCTETS]]

Rank 0 sends a buffer filled with one octet value, rank 1 checks it and
answers with the next value, rank 0 checks that. Each rank prints
"mpi-pingpong: rank R: N round trips of S octets, B bad, U us per round
trip" and exits 1 if any payload was wrong. Through mpi4py (Debian's
python3-mpi4py, built against Open MPI): no compiler needed.
"""
import sys

from mpi4py import MPI


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    peer = 1 - rank
    buf = bytearray(size)
    bad = 0
    comm.Barrier()
    t0 = MPI.Wtime()
    for i in range(n):
        if rank == 0:
            out = bytes([i & 0xff]) * size
            comm.Send([out, MPI.BYTE], dest=peer, tag=i)
            comm.Recv([buf, MPI.BYTE], source=peer, tag=i)
            bad += buf != bytes([(i + 1) & 0xff]) * size
        else:
            comm.Recv([buf, MPI.BYTE], source=peer, tag=i)
            bad += buf != bytes([i & 0xff]) * size
            comm.Send([bytes([(i + 1) & 0xff]) * size, MPI.BYTE], dest=peer, tag=i)
    t = MPI.Wtime() - t0
    print(f"mpi-pingpong: rank {rank}: {n} round trips of {size} octets, {bad} bad, "
          f"{t * 1e6 / n:.1f} us per round trip", flush=True)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
