#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A hostile iWARP peer: COUNT TCP connections to an rdma_cm listener at
ADDR:PORT, each completing an MPA Rev 1 exchange (RFC 5044 7.1) and then
sending one malformed FPDU; alternately
  - an untagged DDP segment with DDP version 0 (a protocol error; CRC off),
  - a well-formed Send whose CRC field is wrong (CRC requested: a CRC error).
Each connection then reads what the peer answers (its Terminate) until the
peer closes. THREADS connections at a time.

  fpdu-attack.py ADDR PORT COUNT [THREADS]

Prints "attack: COUNT connections, N accepted (P protocol, C CRC),
N answered before close, N failed" and exits 0 when every connection was
accepted and closed by the peer."""
import socket
import struct
import sys
import threading

addr, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
threads = int(sys.argv[4]) if len(sys.argv) > 4 else 8
lock = threading.Lock()
stats = {"accepted": 0, "protocol": 0, "crc": 0, "answered": 0, "failed": 0}
errors = []
next_i = [0]


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        chunk = s.recv(n - len(b))
        if not chunk:
            raise EOFError("closed after %d of %d octets" % (len(b), n))
        b += chunk
    return b


def one(i):
    crc = i % 2 == 1
    s = socket.create_connection((addr, port), timeout=20)
    try:
        # MPA Request, Rev 1: no markers, CRC asked on odd connections.
        s.sendall(b"MPA ID Req Frame" + bytes([0x40 if crc else 0, 1]) + struct.pack(">H", 0))
        rep = recv_exact(s, 20)
        if rep[:16] != b"MPA ID Rep Frame" or rep[16] & 0x20:
            raise ValueError("no accepting MPA Reply: %r" % rep)
        recv_exact(s, struct.unpack(">H", rep[18:20])[0])
        if bool(rep[16] & 0x40) != crc:
            raise ValueError("CRC not as asked: reply flags %#x" % rep[16])
        # Untagged DDP header: control (T=0 L=1 DV), RDMAP control (RV=1,
        # Send), reserved, QN 0, MSN 1, MO 0.
        dv = 1 if crc else 0
        ulpdu = bytes([0x40 | dv, 0x43]) + struct.pack(">IIII", 0, 0, 1, 0)
        fpdu = struct.pack(">H", len(ulpdu)) + ulpdu
        fpdu += b"\0" * (-len(fpdu) % 4)
        fpdu += struct.pack(">I", 0xDEADBEEF if crc else 0)
        s.sendall(fpdu)
        answered = False
        while True:
            try:
                b = s.recv(4096)
            except ConnectionResetError:
                break
            if not b:
                break
            answered = True
        with lock:
            stats["accepted"] += 1
            stats["crc" if crc else "protocol"] += 1
            stats["answered"] += answered
    finally:
        s.close()


def worker():
    while True:
        with lock:
            i = next_i[0]
            next_i[0] += 1
        if i >= count:
            return
        try:
            one(i)
        except Exception as e:  # counted, and the first few printed
            with lock:
                stats["failed"] += 1
                if len(errors) < 5:
                    errors.append("connection %d: %s" % (i, e))


ts = [threading.Thread(target=worker) for _ in range(threads)]
for t in ts:
    t.start()
for t in ts:
    t.join()
for e in errors:
    print("# " + e)
print("attack: %d connections, %d accepted (%d protocol, %d CRC), %d answered before close, %d failed"
      % (count, stats["accepted"], stats["protocol"], stats["crc"], stats["answered"], stats["failed"]))
sys.exit(0 if stats["accepted"] == count else 1)
