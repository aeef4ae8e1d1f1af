#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A hostile iWARP peer against one unprivileged rsiw QP.

Each case starts tests/progs/rsiw-hostile-target (TARGET, a command
prefix the script appends "ADDR PORT A_LEN" to: the shell puts it in the
right namespace, as the right user), connects to it over plain TCP, does
the MPA Rev 1 exchange itself (RFC 5044 section 7.1: markers off, CRC as
the case asks) and sends crafted FPDUs, telling the target to change its
registrations while an FPDU or a Read Response is half done.

  hostile-peer.py [--cases a,b,c,d] [--ro-file PATH] ADDR PORT TARGET...

  a  write-stall-then-reregister-read-only: a Write FPDU's header and 8
     octets for MR A, stall; A deregistered, a read-only mmap of a file
     the target can only read registered at A's STag (the test module's
     kunit_stag_reuse makes that STag come back at once) and iova; the
     rest of the FPDU. Passes when rsiw answers with a Terminate and the
     file is byte-for-byte unchanged; the Terminate should say DDP tagged
     invalid STag (RFC 5041 7.2), as siw's does.
  b  write-stall-then-reregister-writable: the same with a writable MR of
     the target's own holding 0x5E: Terminate, and that MR still all 0x5E.
  c  read-response-source-reregistered: a 4 MiB Read Request against A
     (0xA5), the response read a little, then not (TCP's window fills and
     rsiw's TX stalls mid-response); A deregistered and a 0x5E MR
     registered at its STag; the rest read: no 0x5E on the wire (only
     A's octets, or zeros where an FPDU's source failed after its header
     left), a Terminate or a close before the whole response, and the
     Terminate an RDMAP remote protection invalid STag (RFC 5040 7.2).
  d  edges: length and offset fields at their edges, each its own
     connection; the Terminate's layer/type/code checked against RFC 5040
     section 7.2 / RFC 5041 section 7.2 / RFC 5044 section 8.

Prints "ok - ..." / "not ok - ..." per check and "# ..." notes, then
"N passed, N failed"; exit status 0 when nothing failed."""
import argparse
import os
import select
import shlex
import socket
import struct
import subprocess
import sys
import time

A_FILL = 0xA5
SECRET = 0x5E
U64 = 1 << 64

# RDMAP opcodes (RFC 5040 section 4.3).
WRITE, READ_REQ, READ_RESP, SEND, TERMINATE = 0, 1, 2, 3, 7

# Terminate layer/etype/code triplets (RFC 5040 section 7.2 for RDMAP,
# RFC 5041 section 7.2 for DDP, RFC 5044 section 8 for the LLP).
RDMAP_INVALID_STAG = (0, 1, 0x00)
RDMAP_BASE_BOUNDS = (0, 1, 0x01)
RDMAP_TO_WRAP = (0, 1, 0x04)
DDP_T_INVALID_STAG = (1, 1, 0x00)
DDP_T_BASE_BOUNDS = (1, 1, 0x01)
DDP_T_TO_WRAP = (1, 1, 0x03)
DDP_U_TOO_LONG = (1, 2, 0x05)
LLP_CRC = (2, 0, 0x02)

LAYER = {0: "RDMAP", 1: "DDP", 2: "LLP"}

passed = 0
failed = 0


def ok(cond, name, why=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok - " + name, flush=True)
    else:
        failed += 1
        print("not ok - " + name + (" (%s)" % why if why else ""), flush=True)
    return cond


def note(s):
    for line in str(s).splitlines():
        print("# " + line, flush=True)


def term_str(t):
    if t is None:
        return "none"
    return "layer %d (%s) type %d code 0x%02x" % (t[0], LAYER.get(t[0], "?"), t[1], t[2])


# --- CRC32c (RFC 5044 section 6.1, appendix B): reflected 0x82F63B78,
# sent little-endian (as the engine's mpa/tx.rs does).
_CRC_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def crc32c(data):
    c = 0xFFFFFFFF
    t = _CRC_TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


# --- wire formats
def tagged(opcode, stag, to, last=True):
    """DDP tagged header (T=1, L, DV=1) + RDMAP control (RV=1), 14 octets."""
    return bytes([0x80 | (0x40 if last else 0) | 1, 0x40 | opcode]) + struct.pack(">IQ", stag, to % U64)


def untagged(opcode, qn, msn, mo=0, last=True, rsvd=0):
    """DDP untagged header (T=0, L, DV=1) + RDMAP control, 18 octets."""
    return bytes([(0x40 if last else 0) | 1, 0x40 | opcode]) + struct.pack(">IIII", rsvd, qn, msn, mo)


def read_request(msn, sink_stag, sink_to, size, src_stag, src_to):
    return untagged(READ_REQ, 1, msn) + struct.pack(
        ">IQIIQ", sink_stag, sink_to % U64, size, src_stag, src_to % U64)


def fpdu(ulpdu, crc, bad_crc=False, length=None):
    """MPA FPDU: ULPDU length, ULPDU, pad to 4, CRC field (zero when CRC is off)."""
    n = len(ulpdu) if length is None else length
    b = struct.pack(">H", n) + ulpdu
    b += b"\0" * (-len(b) % 4)
    c = crc32c(b) if crc else 0
    if bad_crc:
        c ^= 0xFFFFFFFF
    return b + struct.pack("<I", c)


class Peer:
    """One raw TCP connection speaking MPA Rev 1."""

    def __init__(self, addr, port, crc=False, rcvbuf=None):
        self.crc = crc
        self.s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.s.settimeout(30)
        self.s.connect((addr, port))
        self.buf = b""
        self.eof = False
        self.reset = False

    def mpa_request(self):
        self.s.sendall(b"MPA ID Req Frame" + bytes([0x40 if self.crc else 0, 1]) + struct.pack(">H", 0))

    def mpa_reply(self):
        rep = self.need(20, 30)
        if rep is None or rep[:16] != b"MPA ID Rep Frame" or rep[16] & 0x20:
            raise RuntimeError("no accepting MPA Reply: %r" % rep)
        if self.need(struct.unpack(">H", rep[18:20])[0], 10) is None:
            raise RuntimeError("MPA Reply private data cut short")
        if bool(rep[16] & 0x40) != self.crc:
            raise RuntimeError("CRC not as asked: reply flags %#x" % rep[16])

    def send(self, b):
        self.s.sendall(b)

    def fill(self, timeout):
        """Reads what is there within timeout; False on EOF/reset/timeout."""
        if self.eof:
            return False
        r, _, _ = select.select([self.s], [], [], max(timeout, 0))
        if not r:
            return False
        try:
            b = self.s.recv(1 << 16)
        except ConnectionResetError:
            self.eof = self.reset = True
            return False
        if not b:
            self.eof = True
            return False
        self.buf += b
        return True

    def need(self, n, timeout):
        deadline = time.monotonic() + timeout
        while len(self.buf) < n:
            if not self.fill(deadline - time.monotonic()) and (self.eof or time.monotonic() >= deadline):
                return None
        b, self.buf = self.buf[:n], self.buf[n:]
        return b

    def fpdu(self, timeout):
        """The next FPDU's ULPDU, or None (EOF, reset, timeout)."""
        h = self.need(2, timeout)
        if h is None:
            return None
        n = struct.unpack(">H", h)[0]
        rest = self.need(n + (-(n + 2) % 4) + 4, timeout)
        if rest is None:
            return None
        return rest[:n]

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


def decode(u):
    """(opcode, tagged, fields...) of a ULPDU; for a Terminate, its triplet."""
    if len(u) < 2:
        return {"op": None}
    t = bool(u[0] & 0x80)
    d = {"op": u[1] & 0x0F, "tagged": t, "last": bool(u[0] & 0x40)}
    if t:
        if len(u) >= 14:
            d["stag"], d["to"] = struct.unpack(">IQ", u[2:14])
            d["payload"] = u[14:]
    elif len(u) >= 18:
        d["qn"], d["msn"], d["mo"] = struct.unpack(">III", u[6:18])
        if d["op"] == TERMINATE and len(u) >= 22:
            d["term"] = (u[18] >> 4, u[18] & 0x0F, u[19])
            d["term_flags"] = u[20] >> 5
    return d


def read_until_close(p, timeout, on_fpdu=None):
    """Reads FPDUs until EOF/reset/timeout; returns (terminates, closed)."""
    terms = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        u = p.fpdu(deadline - time.monotonic())
        if u is None:
            break
        d = decode(u)
        if d["op"] == TERMINATE:
            terms.append(d)
        if on_fpdu:
            on_fpdu(d)
    return terms, p.eof


class Target:
    """rsiw-hostile-target as a subprocess, commands by line."""

    def __init__(self, prefix, addr, port, a_len):
        argv = shlex.split(prefix) + [addr, str(port), str(a_len)]
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        self.out = b""
        self.a = None

    def line(self, timeout=30):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.out:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError("target: no answer within %d s" % timeout)
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if r:
                b = os.read(self.p.stdout.fileno(), 4096)
                if not b:
                    raise RuntimeError("target exited (status %s)" % self.p.poll())
                self.out += b
        ln, self.out = self.out.split(b"\n", 1)
        return ln.decode(errors="replace")

    def cmd(self, c, timeout=30):
        self.p.stdin.write((c + "\n").encode())
        self.p.stdin.flush()
        return self.line(timeout)

    def stop(self):
        try:
            if self.p.poll() is None:
                self.cmd("quit", 20)
        except (RuntimeError, BrokenPipeError, OSError):
            pass
        try:
            self.p.wait(20)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def parse_mr(line):
    """{'name', 'stag', 'addr', 'len'} from "mr X stag=0x.. addr=0x.. len=N"."""
    f = line.split()
    if len(f) < 5 or f[0] != "mr":
        raise RuntimeError("target: expected an mr line, got %r" % line)
    kv = dict(x.split("=", 1) for x in f[2:])
    return {"name": f[1], "stag": int(kv["stag"], 16), "addr": int(kv["addr"], 16), "len": int(kv["len"])}


class Case:
    """A fresh target and an MPA-established connection to it."""

    port = None

    def __init__(self, args, crc=False, rcvbuf=None):
        Case.port += 1
        self.t = Target(args.target, args.addr, Case.port, args.a_len)
        self.p = None
        ln = self.t.line(60)
        if not ln.startswith("listening"):
            raise RuntimeError("target: %r" % ln)
        note("target: " + ln)
        self.p = Peer(args.addr, Case.port, crc, rcvbuf)
        self.p.mpa_request()
        self.p.mpa_reply()
        self.a = parse_mr(self.t.line(60))

    def poll(self):
        ln = self.t.cmd("poll")
        note("target: " + ln)
        return dict(x.split("=", 1) for x in ln.split() if "=" in x)

    def close(self):
        if self.p:
            self.p.close()
        self.t.stop()


def expect_terminate(name, terms, closed, want, rfc):
    got = terms[0]["term"] if terms and "term" in terms[0] else None
    note("%s: Terminate %s (expected %s, %s); closed: %s" % (name, term_str(got), term_str(want), rfc, closed))
    if terms and "term" in terms[0]:
        d = terms[0]
        ok(d.get("qn") == 2 and d.get("last"), "%s: the Terminate is untagged, QN 2, L=1 (RFC 5040 4.8)" % name,
           "qn %s last %s" % (d.get("qn"), d.get("last")))
    ok(got == want, "%s: Terminate %s (%s)" % (name, term_str(want), rfc), "got " + term_str(got))


def stall_write(args, name, reregister, verify):
    """Cases a and b: a Write FPDU split around a re-registration."""
    c = Case(args)
    try:
        a = c.a
        note("%s: %s" % (name, "mr A stag=0x%x addr=0x%x len=%d" % (a["stag"], a["addr"], a["len"])))
        payload = bytes([0x41]) * 1024
        wire = fpdu(tagged(WRITE, a["stag"], a["addr"]) + payload, False)
        head = 2 + 14 + 8
        c.p.send(wire[:head])
        time.sleep(1)  # placed: header validated, 8 octets in A
        ln = c.t.cmd("dereg")
        if not ok(ln == "ok dereg", "%s: setup: A deregistered mid-FPDU" % name, ln):
            return
        ln = c.t.cmd(reregister)
        try:
            b = parse_mr(ln)
        except (RuntimeError, KeyError, ValueError):
            ok(False, "%s: setup: %s" % (name, reregister), ln)
            return
        note("%s: %s" % (name, ln))
        if not ok(b["stag"] == a["stag"],
                  "%s: setup: the new MR has A's STag (kunit_stag_reuse)" % name,
                  "B 0x%x, A 0x%x: not the test module with kunit_stag_reuse=1?" % (b["stag"], a["stag"])):
            return
        c.p.send(wire[head:])
        terms, closed = read_until_close(c.p, 20)
        got = terms[0]["term"] if terms and "term" in terms[0] else None
        note("%s: answer after the rest of the FPDU: Terminate %s; closed: %s" % (name, term_str(got), closed))
        c.poll()
        ok(bool(terms), "%s: rsiw answers the rest of the FPDU with a Terminate" % name,
           "no Terminate; closed: %s" % closed)
        verify(c)
        # The STag the segment was validated for names no registration of
        # it any more: to the peer that is an invalid STag, the DDP tagged
        # buffer error (siw_proc_write answers so), not a local failure.
        if got is not None:
            ok(got == DDP_T_INVALID_STAG,
               "%s: the Terminate is %s (RFC 5041 7.2 tagged: invalid STag)" % (name, term_str(DDP_T_INVALID_STAG)),
               "got " + term_str(got))
    finally:
        c.close()


def case_a(args):
    name = "a: write-stall-then-reregister-read-only"
    with open(args.ro_file, "rb") as f:
        saved = f.read()

    def verify(c):
        with open(args.ro_file, "rb") as f:
            now = f.read()
        diff = sum(1 for x, y in zip(saved, now) if x != y) + abs(len(saved) - len(now))
        if diff:
            note("%s: file now begins %r" % (name, now[:32]))
        ok(diff == 0, "%s: %s unchanged byte for byte" % (name, args.ro_file), "%d octets differ" % diff)

    stall_write(args, name, "reg_ro " + args.ro_file, verify)


def case_b(args):
    name = "b: write-stall-then-reregister-writable"

    def verify(c):
        ln = c.t.cmd("dump")
        note("%s: %s" % (name, ln))
        ok(ln.endswith(" not5e=0"), "%s: the other MR is still all 0x5E" % name, ln)

    stall_write(args, name, "reg_secret", verify)


def case_c(args):
    name = "c: read-response-source-reregistered"
    c = Case(args, rcvbuf=4096)
    try:
        a = c.a
        note("%s: mr A stag=0x%x addr=0x%x len=%d" % (name, a["stag"], a["addr"], a["len"]))
        c.p.send(fpdu(read_request(1, 0x12345600, 0, a["len"], a["stag"], a["addr"]), False))
        stats = {"before": 0, "after": 0, "secret": 0, "other": 0, "resp": 0, "other_vals": set()}
        phase = ["before"]

        def count(d):
            if d["op"] != READ_RESP:
                return
            pl = d.get("payload", b"")
            stats["resp"] += 1
            stats[phase[0]] += len(pl)
            s = pl.count(bytes([SECRET]))
            o = len(pl) - s - pl.count(bytes([A_FILL]))
            stats["secret"] += s
            stats["other"] += o
            if phase[0] == "after" or o:
                vals = sorted(set(pl) - {A_FILL, SECRET})
                stats["other_vals"].update(vals)
                note("%s: Read Response TO 0x%x, %d octets: 0x5E %d, other %d %s; first other at %s"
                     % (name, d.get("to", 0), len(pl), s, o, ["0x%02x" % v for v in vals[:8]],
                        next((i for i, x in enumerate(pl) if x not in (A_FILL, SECRET)), None)))

        # A little of the response, then nothing: the window closes.
        deadline = time.monotonic() + 30
        while stats["before"] < 32768 and time.monotonic() < deadline:
            u = c.p.fpdu(deadline - time.monotonic())
            if u is None:
                break
            count(decode(u))
        if not ok(stats["before"] > 0, "%s: setup: the Read Response started" % name,
                  "%d octets, eof %s" % (stats["before"], c.p.eof)):
            return
        time.sleep(3)
        phase[0] = "after"
        ln = c.t.cmd("dereg")
        if not ok(ln == "ok dereg", "%s: setup: A deregistered mid-response" % name, ln):
            return
        ln = c.t.cmd("reg_secret")
        note("%s: %s" % (name, ln))
        try:
            s = parse_mr(ln)
        except (RuntimeError, KeyError, ValueError):
            ok(False, "%s: setup: reg_secret" % name, ln)
            return
        if not ok(s["stag"] == a["stag"], "%s: setup: the 0x5E MR has A's STag (kunit_stag_reuse)" % name,
                  "S 0x%x, A 0x%x: not the test module with kunit_stag_reuse=1?" % (s["stag"], a["stag"])):
            return
        # The rest as fast as it comes (the window opens again).
        c.p.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        terms, closed = read_until_close(c.p, 120, count)
        got = terms[0]["term"] if terms and "term" in terms[0] else None
        total = stats["before"] + stats["after"]
        note("%s: %d Read Response FPDUs, %d payload octets before the re-registration, %d after "
             "(of %d); 0x5E octets: %d, octets neither 0xA5 nor 0x5E: %d; Terminate %s; closed: %s"
             % (name, stats["resp"], stats["before"], stats["after"], a["len"], stats["secret"], stats["other"],
                term_str(got), closed))
        c.poll()
        ok(stats["secret"] == 0, "%s: no octet of the other MR (0x5E) on the wire" % name,
           "%d octets of 0x5E sent" % stats["secret"])
        ok((bool(terms) or closed) and total < a["len"],
           "%s: a Terminate or a close before the whole response" % name,
           "%d of %d octets, Terminate %s, closed %s" % (total, a["len"], term_str(got), closed))
        # An FPDU whose source fails after its header is on the wire goes
        # out with zeros for the rest (the framing must hold until the
        # Terminate): zeros may appear, nothing else but A's octets.
        ok(not stats["other_vals"] - {0},
           "%s: every Read Response octet is A's or the zero fill of the failed FPDU" % name,
           "other octet values %s" % ["0x%02x" % v for v in sorted(stats["other_vals"])[:8]])
        # The Read's source registration is gone: RDMAP's remote
        # protection error for the Data Source STag, not a local failure.
        if got is not None:
            ok(got == RDMAP_INVALID_STAG,
               "%s: the Terminate is %s (RFC 5040 7.2 remote protection: invalid STag)"
               % (name, term_str(RDMAP_INVALID_STAG)), "got " + term_str(got))
    finally:
        c.close()


def edge(args, name, send, want, rfc, crc=False):
    c = Case(args, crc=crc)
    try:
        send(c, c.a)
        terms, closed = read_until_close(c.p, 20)
        c.poll()
        expect_terminate("d: " + name, terms, closed, want, rfc)
    finally:
        c.close()


def edge_write_last_octet(args):
    name = "d: write-to-end-minus-1-len-1"
    c = Case(args)
    try:
        a = c.a
        c.p.send(fpdu(tagged(WRITE, a["stag"], a["addr"] + a["len"] - 1) + b"\x41", False))
        c.p.send(fpdu(untagged(SEND, 0, 1) + b"still alive", False))
        got_any = c.p.fill(3)
        terms = [] if not got_any else [decode(u) for u in [c.p.fpdu(1)] if u]
        ok(not got_any and not c.p.eof, "%s: accepted, no Terminate, connection open" % name,
           "answer: %s, eof %s" % ([term_str(t.get("term")) for t in terms], c.p.eof))
        st = c.poll()
        ok(st.get("ok") == "1" and st.get("qp_error") == "0",
           "%s: the Send after it completes on the target, QP not in error" % name, str(st))
        ln = c.t.cmd("peek %d 1" % (a["len"] - 1))
        ok(ln == "peek 41", "%s: the octet landed at A's last octet" % name, ln)
    finally:
        c.close()


def case_d(args):
    edge_write_last_octet(args)
    edge(args, "write-at-end-len-1",
         lambda c, a: c.p.send(fpdu(tagged(WRITE, a["stag"], a["addr"] + a["len"]) + b"\x41", False)),
         DDP_T_BASE_BOUNDS, "RFC 5041 7.2 tagged: base or bounds violation")
    edge(args, "write-to-plus-len-wraps-2^64",
         lambda c, a: c.p.send(fpdu(tagged(WRITE, a["stag"], U64 - 4) + b"\x41" * 8, False)),
         DDP_T_TO_WRAP, "RFC 5041 7.2 tagged: TO wrap")
    edge(args, "write-unknown-stag",
         lambda c, a: c.p.send(fpdu(tagged(WRITE, (a["stag"] ^ 0x5A5A5A00) & 0xFFFFFF00, a["addr"]) + b"\x41", False)),
         DDP_T_INVALID_STAG, "RFC 5041 7.2 tagged: invalid STag")
    edge(args, "read-source-to-plus-size-wraps-2^64",
         lambda c, a: c.p.send(fpdu(read_request(1, 0x12345600, 0, 32, a["stag"], U64 - 16), False)),
         RDMAP_TO_WRAP, "RFC 5040 7.2 remote protection: TO wrap")
    edge(args, "read-beyond-source",
         lambda c, a: c.p.send(fpdu(read_request(1, 0x12345600, 0, 32, a["stag"], a["addr"] + a["len"] - 16), False)),
         RDMAP_BASE_BOUNDS, "RFC 5040 7.2 remote protection: base or bounds violation")
    edge(args, "read-size-0x7fffffff",
         lambda c, a: c.p.send(fpdu(read_request(1, 0x12345600, 0, 0x7FFFFFFF, a["stag"], a["addr"]), False)),
         RDMAP_BASE_BOUNDS, "RFC 5040 7.2 remote protection: base or bounds violation")
    edge(args, "send-longer-than-the-posted-receive",
         lambda c, a: c.p.send(fpdu(untagged(SEND, 0, 1) + b"\x42" * 65, False)),
         DDP_U_TOO_LONG, "RFC 5041 7.2 untagged: DDP message too long for available buffer")

    # ULPDU length 0xFFFF (larger than any FPDU rsiw sends or a TCP
    # segment carries: MULPDU follows the EMSS), a Write into A that fits,
    # sent whole with a wrong CRC: the length is taken as it is and the CRC
    # checked at its very end.
    def big(c, a):
        ulpdu = tagged(WRITE, a["stag"], a["addr"]) + b"\x43" * (0xFFFF - 14)
        c.p.send(fpdu(ulpdu, True, bad_crc=True))
    edge(args, "mpa-length-0xffff-bad-crc", big, LLP_CRC, "RFC 5044 8: MPA CRC error", crc=True)


def main():
    global failed
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="a,b,c,d")
    ap.add_argument("--ro-file", default="/tmp/hostile-ro")
    ap.add_argument("--a-len", type=int, default=4 << 20)
    ap.add_argument("addr")
    ap.add_argument("port", type=int)
    ap.add_argument("target", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    args.target = " ".join(shlex.quote(x) for x in args.target)
    Case.port = args.port - 1
    run = {"a": case_a, "b": case_b, "c": case_c, "d": case_d}
    for k in args.cases.split(","):
        try:
            run[k](args)
        except Exception as e:  # the case is lost, not the suite
            ok(False, "case %s ran to its end" % k, "%s: %s" % (type(e).__name__, e))
    print("%d passed, %d failed" % (passed, failed), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
