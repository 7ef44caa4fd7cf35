#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""nbdraw.py - drive an NBD server with raw sockets and malformed input.

Used by test-malformed-requests.sh.  Does the fixed-newstyle handshake by
hand, then sends each kind of bad input wbd must survive and checks the exact
reply (or a clean disconnect where the protocol calls for one).  A second,
well-behaved client (libnbd) writes and reads back a block before and after
every case, so a case that disturbs other clients fails too.

Usage: nbdraw.py --unix SOCKET --export NAME --size BYTES
                 --ro-export NAME [--tcp PORT]
Exit status: 0 all cases passed, 1 some failed (each one is printed).
"""

import argparse
import os
import socket
import struct
import sys
import time

# Protocol constants (doc/proto.md of the NetworkBlockDevice/nbd repository).
NBD_MAGIC = 0x4E42444D41474943
NBD_OPT_MAGIC = 0x49484156454F5054
NBD_REP_MAGIC = 0x0003E889045565A9
NBD_REQUEST_MAGIC = 0x25609513
NBD_SIMPLE_REPLY_MAGIC = 0x67446698
NBD_STRUCTURED_REPLY_MAGIC = 0x668E33EF

NBD_FLAG_FIXED_NEWSTYLE = 1 << 0
NBD_FLAG_NO_ZEROES = 1 << 1

OPT_EXPORT_NAME = 1
OPT_ABORT = 2
OPT_LIST = 3
OPT_INFO = 6
OPT_GO = 7
OPT_STRUCTURED_REPLY = 8
OPT_SET_META_CONTEXT = 10

REP_ACK = 1
REP_SERVER = 2
REP_INFO = 3
REP_META_CONTEXT = 4
REP_ERR = 1 << 31
REP_ERR_UNSUP = REP_ERR | 1
REP_ERR_UNKNOWN = REP_ERR | 6
REP_ERR_TOO_BIG = REP_ERR | 9
REP_NAMES = {REP_ACK: "ACK", REP_SERVER: "SERVER", REP_INFO: "INFO",
             REP_ERR_UNSUP: "ERR_UNSUP", REP_ERR | 2: "ERR_POLICY",
             REP_ERR | 3: "ERR_INVALID", REP_ERR | 4: "ERR_PLATFORM",
             REP_ERR_UNKNOWN: "ERR_UNKNOWN", REP_ERR_TOO_BIG: "ERR_TOO_BIG"}

INFO_EXPORT = 0
INFO_NAME = 1
INFO_DESCRIPTION = 2
INFO_BLOCK_SIZE = 3

F_HAS_FLAGS = 1 << 0
F_READ_ONLY = 1 << 1
F_SEND_FLUSH = 1 << 2
F_SEND_FUA = 1 << 3
F_SEND_TRIM = 1 << 5
F_SEND_WRITE_ZEROES = 1 << 6
F_CAN_MULTI_CONN = 1 << 8
F_SEND_FAST_ZERO = 1 << 11

CMD_READ = 0
CMD_WRITE = 1
CMD_DISC = 2
CMD_FLUSH = 3
CMD_TRIM = 4
CMD_WRITE_ZEROES = 6
CMD_BLOCK_STATUS = 7

CMD_FLAG_FUA = 1 << 0
CMD_FLAG_NO_HOLE = 1 << 1
CMD_FLAG_FAST_ZERO = 1 << 4

REPLY_FLAG_DONE = 1 << 0
REPLY_TYPE_NONE = 0
REPLY_TYPE_OFFSET_DATA = 1
REPLY_TYPE_OFFSET_HOLE = 2
REPLY_TYPE_ERROR = (1 << 15) | 1
REPLY_TYPE_ERROR_OFFSET = (1 << 15) | 2

EPERM, EIO, EINVAL, ENOSPC, ENOTSUP = 1, 5, 22, 28, 95
ERR_NAMES = {0: "OK", EPERM: "EPERM", EIO: "EIO", 12: "ENOMEM",
             EINVAL: "EINVAL", ENOSPC: "ENOSPC", 75: "EOVERFLOW",
             ENOTSUP: "ENOTSUP", 108: "ESHUTDOWN"}

MiB = 1 << 20
MAX_BLOCK = 32 * MiB
TIMEOUT = 20.0


class Disconnected(Exception):
    pass


class CaseFailed(Exception):
    pass


def errname(e):
    return ERR_NAMES.get(e, str(e))


def repname(r):
    return REP_NAMES.get(r, hex(r))


class Raw:
    """One raw connection to the server."""

    def __init__(self, args, tcp=False):
        if tcp:
            self.s = socket.create_connection(("127.0.0.1", args.tcp),
                                              timeout=TIMEOUT)
        else:
            self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.s.settimeout(TIMEOUT)
            self.s.connect(args.unix)
        self.structured = False

    def close(self):
        self.s.close()

    def send(self, data):
        self.s.sendall(data)

    def recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.s.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise Disconnected("server closed the connection after %d of %d bytes"
                                   % (len(buf), n))
            buf += chunk
        return bytes(buf)

    def expect_eof(self, what, allow_data=False):
        """The server must close the connection (within TIMEOUT)."""
        got = 0
        try:
            while True:
                chunk = self.s.recv(65536)
                if not chunk:
                    break
                got += len(chunk)
                if not allow_data:
                    raise CaseFailed("%s: expected a disconnect, got %d bytes of data"
                                     % (what, got))
        except ConnectionResetError:
            pass
        except socket.timeout:
            raise CaseFailed("%s: expected a disconnect, connection still open after %ds"
                             % (what, TIMEOUT))

    # Handshake.
    def greeting(self, client_flags=NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES):
        magic, opt_magic, flags = struct.unpack(">QQH", self.recv_exact(18))
        if magic != NBD_MAGIC or opt_magic != NBD_OPT_MAGIC:
            raise CaseFailed("bad greeting magic %x %x" % (magic, opt_magic))
        if not flags & NBD_FLAG_FIXED_NEWSTYLE:
            raise CaseFailed("server does not offer fixed newstyle")
        if not flags & NBD_FLAG_NO_ZEROES:
            raise CaseFailed("server does not offer NO_ZEROES")
        if client_flags is not None:
            self.send(struct.pack(">I", client_flags))
        return flags

    def send_option(self, opt, data=b"", length=None):
        if length is None:
            length = len(data)
        self.send(struct.pack(">QII", NBD_OPT_MAGIC, opt, length) + data)

    def option_reply(self):
        magic, opt, rtype, length = struct.unpack(">QIII", self.recv_exact(20))
        if magic != NBD_REP_MAGIC:
            raise CaseFailed("bad option reply magic %x" % magic)
        if length > 16 * MiB:
            raise CaseFailed("option reply of %d bytes" % length)
        return opt, rtype, self.recv_exact(length)

    def option_replies(self, opt):
        """Replies to OPT until a final one (ACK or an error)."""
        out = []
        while True:
            ropt, rtype, data = self.option_reply()
            if ropt != opt:
                raise CaseFailed("reply for option %d while %d was asked" % (ropt, opt))
            out.append((rtype, data))
            if rtype == REP_ACK or rtype & REP_ERR:
                return out

    @staticmethod
    def info_payload(name, infos=(INFO_BLOCK_SIZE,)):
        n = name.encode()
        return (struct.pack(">I", len(n)) + n + struct.pack(">H", len(infos))
                + b"".join(struct.pack(">H", i) for i in infos))

    def go(self, name, opt=OPT_GO, infos=(INFO_BLOCK_SIZE,)):
        """INFO or GO; returns (final reply type, {info type: data})."""
        self.send_option(opt, self.info_payload(name, infos))
        infos_got = {}
        for rtype, data in self.option_replies(opt):
            if rtype == REP_INFO:
                (itype,) = struct.unpack(">H", data[:2])
                infos_got[itype] = data
            elif rtype != REP_ACK:
                return rtype, infos_got
        return REP_ACK, infos_got

    def open(self, name, structured=False, meta=()):
        """Handshake up to transmission, selecting the META contexts
        (structured replies first); returns (size, flags)."""
        self.greeting()
        if structured or meta:
            self.send_option(OPT_STRUCTURED_REPLY)
            r = self.option_replies(OPT_STRUCTURED_REPLY)
            if r[-1][0] != REP_ACK:
                raise CaseFailed("STRUCTURED_REPLY refused: %s" % repname(r[-1][0]))
            self.structured = True
        if meta:
            n = name.encode()
            qs = [q.encode() for q in meta]
            self.send_option(OPT_SET_META_CONTEXT,
                             struct.pack(">I", len(n)) + n +
                             struct.pack(">I", len(qs)) +
                             b"".join(struct.pack(">I", len(q)) + q for q in qs))
            r = self.option_replies(OPT_SET_META_CONTEXT)
            got = sum(1 for rtype, _ in r if rtype == REP_META_CONTEXT)
            if r[-1][0] != REP_ACK or got != len(meta):
                raise CaseFailed("SET_META_CONTEXT %r: %d selected, %s"
                                 % (meta, got, repname(r[-1][0])))
        rtype, infos = self.go(name)
        if rtype != REP_ACK:
            raise CaseFailed("GO %r: %s" % (name, repname(rtype)))
        if INFO_EXPORT not in infos:
            raise CaseFailed("GO %r: no NBD_INFO_EXPORT" % name)
        _, size, flags = struct.unpack(">HQH", infos[INFO_EXPORT])
        return size, flags

    # Transmission.
    def request(self, cmd, offset, length, flags=0, handle=0x1234, payload=b"",
                magic=NBD_REQUEST_MAGIC):
        self.send(struct.pack(">IHHQQI", magic, flags, cmd, handle, offset, length)
                  + payload)

    def reply(self, read_length=0, read_offset=0):
        """One complete reply; returns (handle, error, data).  A READ's data
        (READ_LENGTH bytes from READ_OFFSET) is gathered from its chunks."""
        (magic,) = struct.unpack(">I", self.recv_exact(4))
        if magic == NBD_SIMPLE_REPLY_MAGIC:
            error, handle = struct.unpack(">IQ", self.recv_exact(12))
            data = self.recv_exact(read_length) if error == 0 and read_length else b""
            return handle, error, data
        if magic != NBD_STRUCTURED_REPLY_MAGIC:
            raise CaseFailed("bad reply magic %x" % magic)
        if not self.structured:
            raise CaseFailed("structured reply before STRUCTURED_REPLY was negotiated")
        error = 0
        data = bytearray(read_length)
        while True:
            flags, rtype, handle, length = struct.unpack(">HHQI", self.recv_exact(16))
            if length > MAX_BLOCK + 64:
                raise CaseFailed("structured chunk of %d bytes" % length)
            payload = self.recv_exact(length)
            if rtype == REPLY_TYPE_ERROR or rtype == REPLY_TYPE_ERROR_OFFSET:
                (error,) = struct.unpack(">I", payload[:4])
            elif rtype == REPLY_TYPE_OFFSET_DATA:
                (off,) = struct.unpack(">Q", payload[:8])
                chunk = payload[8:]
                start = off - read_offset
                if start < 0 or start + len(chunk) > read_length:
                    raise CaseFailed("data chunk %d@%d outside the read %d@%d"
                                     % (len(chunk), off, read_length, read_offset))
                data[start:start + len(chunk)] = chunk
            elif rtype not in (REPLY_TYPE_NONE, REPLY_TYPE_OFFSET_HOLE):
                raise CaseFailed("unknown structured reply type %d" % rtype)
            if flags & REPLY_FLAG_DONE:
                return handle, error, bytes(data)

    def expect_error(self, what, want, handle=0x1234):
        h, err, _ = self.reply()
        if h != handle:
            raise CaseFailed("%s: reply for handle %x, expected %x" % (what, h, handle))
        if err != want:
            raise CaseFailed("%s: expected %s, got %s" % (what, errname(want), errname(err)))

    def read_ok(self, offset, length, what="read"):
        handle = 0xABCD0000 + (offset & 0xFFFF)
        self.request(CMD_READ, offset, length, handle=handle)
        h, err, data = self.reply(length, offset)
        if h != handle or err != 0:
            raise CaseFailed("%s: read %d@%d after it: handle %x error %s"
                             % (what, length, offset, h, errname(err)))
        return data


class Checker:
    def __init__(self, args):
        self.args = args
        self.failures = []
        self.good = None
        self.seq = 0
        try:
            import nbd
            self.good = nbd.NBD()
            self.good.connect_uri("nbd+unix:///%s?socket=%s" % (args.export, args.unix))
        except ImportError:
            print("note: python3 libnbd bindings missing; the well-behaved "
                  "client is a raw one", file=sys.stderr)

    def good_client(self, when):
        """The well-behaved client writes a block and reads it back."""
        self.seq += 1
        block = os.urandom(4096)
        offset = (self.seq * 4096) % (self.args.size // 2) + self.args.size // 2
        if self.good is not None:
            self.good.pwrite(block, offset)
            back = self.good.pread(4096, offset)
        else:
            c = Raw(self.args)
            c.open(self.args.export)
            c.request(CMD_WRITE, offset, 4096, payload=block)
            c.expect_error("good write", 0)
            back = c.read_ok(offset, 4096)
            c.close()
        if back != block:
            raise CaseFailed("well-behaved client read back other data %s" % when)

    def run(self, name, fn):
        try:
            self.good_client("before " + name)
            fn()
            self.good_client("after " + name)
            print("ok   %s" % name)
        except (CaseFailed, Disconnected, OSError) as e:
            print("FAIL %s: %s" % (name, e))
            self.failures.append(name)
        except Exception as e:  # the good client's nbd.Error and the like
            print("FAIL %s: %s: %s" % (name, type(e).__name__, e))
            self.failures.append(name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--unix", required=True)
    ap.add_argument("--tcp", type=int)
    ap.add_argument("--export", required=True)
    ap.add_argument("--ro-export", required=True)
    ap.add_argument("--size", type=int, required=True)
    args = ap.parse_args()
    size = args.size
    assert size > MAX_BLOCK + 2 * MiB, "export must be larger than 34 MiB"
    ck = Checker(args)

    def conn(structured=False, export=None):
        c = Raw(args)
        sz, flags = c.open(export or args.export, structured)
        return c, sz, flags

    # ---- handshake ----------------------------------------------------
    def flags_advertised():
        for name, ro in ((args.export, False), (args.ro_export, True)):
            c, sz, flags = conn(export=name)
            want = F_HAS_FLAGS | F_SEND_FLUSH | F_CAN_MULTI_CONN
            if not ro:      # a read-only export need not offer write commands
                want |= (F_SEND_FUA | F_SEND_TRIM | F_SEND_WRITE_ZEROES
                         | F_SEND_FAST_ZERO)
            if flags & want != want:
                raise CaseFailed("%s: flags %#x lack %#x" % (name, flags, want & ~flags))
            if bool(flags & F_READ_ONLY) != ro:
                raise CaseFailed("%s: READ_ONLY is %s" % (name, bool(flags & F_READ_ONLY)))
            if name == args.export and sz != size:
                raise CaseFailed("%s: size %d, expected %d" % (name, sz, size))
            c.close()

    def info_block_size():
        c = Raw(args)
        c.greeting()
        rtype, infos = c.go(args.export, OPT_INFO,
                            (INFO_BLOCK_SIZE, INFO_NAME, INFO_DESCRIPTION))
        if rtype != REP_ACK:
            raise CaseFailed("INFO: %s" % repname(rtype))
        if INFO_BLOCK_SIZE not in infos:
            raise CaseFailed("INFO: no NBD_INFO_BLOCK_SIZE")
        bmin, bpref, bmax = struct.unpack(">III", infos[INFO_BLOCK_SIZE][2:14])
        if (bmin, bpref, bmax) != (1, 4096, MAX_BLOCK):
            raise CaseFailed("block sizes %d/%d/%d, expected 1/4096/%d"
                             % (bmin, bpref, bmax, MAX_BLOCK))
        # INFO leaves the client in the option phase: GO still works.
        rtype, _ = c.go(args.export)
        if rtype != REP_ACK:
            raise CaseFailed("GO after INFO: %s" % repname(rtype))
        c.read_ok(0, 512, "GO after INFO")
        c.close()

    def unknown_option():
        c = Raw(args)
        c.greeting()
        c.send_option(0x4242, b"some data")
        r = c.option_replies(0x4242)
        if r[-1][0] != REP_ERR_UNSUP:
            raise CaseFailed("unknown option: expected ERR_UNSUP, got %s" % repname(r[-1][0]))
        rtype, _ = c.go(args.export)
        if rtype != REP_ACK:
            raise CaseFailed("GO after an unknown option: %s" % repname(rtype))
        c.read_ok(0, 4096, "unknown option")
        c.close()

    def unknown_export(opt):
        def case():
            c = Raw(args)
            c.greeting()
            rtype, _ = c.go("no-such-export", opt)
            if rtype != REP_ERR_UNKNOWN:
                raise CaseFailed("expected ERR_UNKNOWN, got %s" % repname(rtype))
            rtype, _ = c.go(args.export)
            if rtype != REP_ACK:
                raise CaseFailed("GO after an unknown export: %s" % repname(rtype))
            c.read_ok(0, 4096)
            c.close()
        return case

    def unknown_export_name():
        c = Raw(args)
        c.greeting()
        c.send_option(OPT_EXPORT_NAME, b"no-such-export")
        c.expect_eof("EXPORT_NAME of an unknown export")
        c.close()

    def list_exports():
        c = Raw(args)
        c.greeting()
        c.send_option(OPT_LIST)
        names = []
        for rtype, data in c.option_replies(OPT_LIST):
            if rtype == REP_SERVER:
                (n,) = struct.unpack(">I", data[:4])
                names.append(data[4:4 + n].decode())
            elif rtype != REP_ACK:
                raise CaseFailed("LIST: %s" % repname(rtype))
        for want in (args.export, args.ro_export):
            if want not in names:
                raise CaseFailed("LIST: %s missing from %s" % (want, names))
        c.close()

    def list_with_data():
        # LIST takes no data: the spec wants ERR_INVALID; anything that
        # keeps the connection usable is accepted.
        c = Raw(args)
        c.greeting()
        c.send_option(OPT_LIST, b"xyz")
        c.option_replies(OPT_LIST)
        rtype, _ = c.go(args.export)
        if rtype != REP_ACK:
            raise CaseFailed("GO after LIST with data: %s" % repname(rtype))
        c.close()

    def truncated_info():
        # An INFO whose name length points past the option's end.
        c = Raw(args)
        c.greeting()
        c.send_option(OPT_INFO, struct.pack(">I", 1000) + b"disk")
        r = c.option_replies(OPT_INFO)
        if not r[-1][0] & REP_ERR:
            raise CaseFailed("malformed INFO answered with %s" % repname(r[-1][0]))
        rtype, _ = c.go(args.export)
        if rtype != REP_ACK:
            raise CaseFailed("GO after a malformed INFO: %s" % repname(rtype))
        c.close()

    def option_too_big():
        c = Raw(args)
        c.greeting()
        c.send_option(0x4243, os.urandom(MiB))   # > 64 KiB, <= 16 MiB
        r = c.option_replies(0x4243)
        if r[-1][0] != REP_ERR_TOO_BIG:
            raise CaseFailed("1 MiB option: expected ERR_TOO_BIG, got %s" % repname(r[-1][0]))
        rtype, _ = c.go(args.export)
        if rtype != REP_ACK:
            raise CaseFailed("GO after a 1 MiB option: %s" % repname(rtype))
        c.read_ok(0, 4096, "1 MiB option")
        c.close()

    def option_absurd():
        c = Raw(args)
        c.greeting()
        c.send_option(OPT_GO, length=0xFFFFFFF0)   # and never send the data
        c.expect_eof("option of 4 GiB", allow_data=True)
        c.close()

    def bad_option_magic():
        c = Raw(args)
        c.greeting()
        c.send(struct.pack(">QII", 0x1122334455667788, OPT_GO, 0))
        c.expect_eof("bad option magic")
        c.close()

    def garbage_after_connect():
        c = Raw(args)
        c.send(b"\xff" * 64 + os.urandom(200))
        try:
            c.recv_exact(18)     # the greeting may or may not be sent
        except (Disconnected, ConnectionResetError):
            pass
        c.expect_eof("garbage after connect", allow_data=True)
        c.close()

    def unknown_client_flags():
        c = Raw(args)
        c.greeting(client_flags=0xFFFF0000 | NBD_FLAG_FIXED_NEWSTYLE)
        c.expect_eof("unknown client flags")
        c.close()

    def abort():
        c = Raw(args)
        c.greeting()
        c.send_option(OPT_ABORT)
        try:
            r = c.option_replies(OPT_ABORT)
            if r[-1][0] != REP_ACK:
                raise CaseFailed("ABORT answered with %s" % repname(r[-1][0]))
        except (Disconnected, ConnectionResetError):
            pass   # the spec allows a server to just close
        c.expect_eof("ABORT")
        c.close()

    def close_mid_handshake():
        for cut in (3, 10, 18 + 4 + 7):
            c = Raw(args)
            if cut > 18:
                c.greeting()
                c.send(struct.pack(">QII", NBD_OPT_MAGIC, OPT_GO, 100)[:cut - 22])
            else:
                c.recv_exact(cut)
            c.close()
        # Many idle half-open handshakes do not block anyone.
        idle = [Raw(args) for _ in range(50)]
        ck.good_client("with 50 idle handshakes")
        for c in idle:
            c.close()

    # ---- transmission -----------------------------------------------
    def read_beyond_end(structured):
        def case():
            c, _, _ = conn(structured)
            for off, ln in ((size - 4096, 8192), (size, 1), (size + MiB, 4096),
                            (1 << 63, 512), ((1 << 64) - 512, 1024)):
                c.request(CMD_READ, off, ln)
                c.expect_error("read %d@%d" % (ln, off), EINVAL)
            c.read_ok(size - 4096, 4096, "read beyond end")
            c.close()
        return case

    def write_beyond_end():
        c, _, _ = conn()
        c.request(CMD_WRITE, size - 512, 1024, payload=b"\x5a" * 1024)
        c.expect_error("write 1024@size-512", ENOSPC)
        c.request(CMD_WRITE, size, 4096, payload=b"\x5a" * 4096)
        c.expect_error("write 4096@size", ENOSPC)
        c.request(CMD_WRITE, (1 << 64) - 512, 1024, payload=b"\x5a" * 1024)
        c.expect_error("write with offset+length past 2^64", ENOSPC)
        c.request(CMD_TRIM, size - 4096, 8192)
        c.expect_error("trim beyond end", ENOSPC)
        c.request(CMD_WRITE_ZEROES, size - 4096, 8192)
        c.expect_error("write_zeroes beyond end", ENOSPC)
        data = c.read_ok(size - 512, 512, "write beyond end")
        if data == b"\x5a" * 512:
            raise CaseFailed("a write beyond the end was partly done")
        c.close()

    def readonly_writes():
        c, _, flags = conn(export=args.ro_export)
        c.request(CMD_WRITE, 0, 4096, payload=b"\x77" * 4096)
        c.expect_error("write to a read-only export", EPERM)
        c.request(CMD_WRITE, 0, 4096, flags=CMD_FLAG_FUA, payload=b"\x77" * 4096)
        c.expect_error("FUA write to a read-only export", EPERM)
        c.request(CMD_TRIM, 0, 4096)
        c.expect_error("trim on a read-only export", EPERM)
        c.request(CMD_WRITE_ZEROES, 0, 4096)
        c.expect_error("write_zeroes on a read-only export", EPERM)
        if c.read_ok(0, 4096, "read-only writes") == b"\x77" * 4096:
            raise CaseFailed("a write to the read-only export was done")
        c.request(CMD_FLUSH, 0, 0)
        c.expect_error("flush on a read-only export", 0)
        c.close()

    def unknown_command():
        c, _, _ = conn()
        for cmd in (42, 0xFFFF, CMD_BLOCK_STATUS):
            c.request(cmd, 0, 4096)
            c.expect_error("command %d" % cmd, EINVAL)
        c.read_ok(0, 4096, "unknown command")
        c.close()

    def unknown_flags(structured):
        def case():
            c, _, _ = conn(structured)
            c.request(CMD_READ, 0, 4096, flags=1 << 15)
            c.expect_error("read with flag 1<<15", EINVAL)
            c.request(CMD_FLUSH, 0, 0, flags=1 << 12)
            c.expect_error("flush with flag 1<<12", EINVAL)
            # A rejected WRITE still has its payload read off the socket.
            c.request(CMD_WRITE, 0, 4096, flags=1 << 15, payload=b"\x99" * 4096)
            c.expect_error("write with flag 1<<15", EINVAL)
            c.request(CMD_WRITE, 8192, 4096, flags=CMD_FLAG_NO_HOLE,
                      payload=b"\x98" * 4096)
            c.expect_error("write with NO_HOLE", EINVAL)
            c.request(CMD_TRIM, 0, 4096, flags=CMD_FLAG_NO_HOLE)
            c.expect_error("trim with NO_HOLE", EINVAL)
            data = c.read_ok(0, 4096, "write with unknown flag")
            if data == b"\x99" * 4096:
                raise CaseFailed("a write with an unknown flag was done")
            c.close()
        return case

    def zero_length():
        c, _, _ = conn()
        c.request(CMD_READ, 0, 0)
        c.expect_error("zero-length read", EINVAL)
        c.request(CMD_WRITE, 0, 0)
        c.expect_error("zero-length write", EINVAL)
        c.read_ok(0, 4096, "zero-length requests")
        c.close()

    def oversized_read():
        c, _, _ = conn()
        c.request(CMD_READ, 0, MAX_BLOCK + 1)
        c.expect_error("read of 32 MiB + 1", EINVAL)
        c.request(CMD_READ, 0, 0xFFFFFFFF)
        c.expect_error("read of 4 GiB - 1", EINVAL)
        data = c.read_ok(0, MAX_BLOCK, "read of exactly 32 MiB")
        if len(data) != MAX_BLOCK:
            raise CaseFailed("32 MiB read returned %d bytes" % len(data))
        c.close()

    def oversized_write():
        c, _, _ = conn()
        payload = b"\x66" * (MAX_BLOCK + 4096)
        c.request(CMD_WRITE, 0, len(payload), payload=payload)
        c.expect_error("write of 32 MiB + 4 KiB", EINVAL)
        if c.read_ok(0, 4096, "oversized write") == b"\x66" * 4096:
            raise CaseFailed("an oversized write was done")
        c.close()

    def huge_write():
        c, _, _ = conn()
        c.request(CMD_WRITE, 0, 0xFFFFFFF0)       # payload never sent
        c.expect_eof("write of 4 GiB announced", allow_data=True)
        c.close()

    def bad_request_magic():
        c, _, _ = conn()
        c.request(CMD_READ, 0, 4096, magic=0xDEADBEEF)
        c.expect_eof("request with a bad magic", allow_data=True)
        c.close()

    def garbage_request():
        c, _, _ = conn()
        c.send(os.urandom(1000))
        c.expect_eof("garbage in transmission", allow_data=True)
        c.close()

    def close_mid_request():
        # Half a request header.
        c, _, _ = conn()
        c.send(struct.pack(">IHHQQI", NBD_REQUEST_MAGIC, 0, CMD_READ, 1, 0, 4096)[:11])
        c.close()
        # A write with half its payload.
        c, _, _ = conn()
        c.request(CMD_WRITE, 0, MiB, payload=b"\x44" * (MiB // 2))
        c.close()
        # A big read whose reply is never read (the server must not die of
        # SIGPIPE or block the loop on this client).
        for structured in (False, True):
            c, _, _ = conn(structured)
            for i in range(4):
                c.request(CMD_READ, 0, MAX_BLOCK, handle=i)
            c.close()
        # A slow client that stops reading while requests pile up.
        c, _, _ = conn()
        c.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        for i in range(8):
            c.request(CMD_READ, 0, 4 * MiB, handle=i)
        ck.good_client("while a client does not read its replies")
        c.close()
        time.sleep(0.2)

    def pipelined():
        c, _, _ = conn(structured=True)
        blocks = {}
        for i in range(32):
            blocks[i] = os.urandom(4096)
            c.request(CMD_WRITE, (i + 100) * 4096, 4096, handle=i,
                      flags=CMD_FLAG_FUA if i % 3 == 0 else 0, payload=blocks[i])
        seen = set()
        for _ in range(32):
            h, err, _ = c.reply()
            if err:
                raise CaseFailed("pipelined write %d: %s" % (h, errname(err)))
            seen.add(h)
        if seen != set(range(32)):
            raise CaseFailed("pipelined writes: replies for %s" % sorted(seen))
        c.request(CMD_FLUSH, 0, 0, handle=99)
        c.expect_error("flush", 0, handle=99)
        for i in range(32):
            if c.read_ok((i + 100) * 4096, 4096) != blocks[i]:
                raise CaseFailed("pipelined write %d read back wrong" % i)
        c.close()

    def fua_on_every_command(structured):
        # SEND_FUA is advertised, so the spec has the server accept FUA on
        # every command, even READ and FLUSH, where it means nothing.
        def case():
            c, _, _ = conn(structured)
            c.request(CMD_WRITE, 0, 4096, payload=b"\x5a" * 4096)
            c.expect_error("write", 0)
            c.request(CMD_READ, 0, 4096, flags=CMD_FLAG_FUA, handle=0x77)
            h, err, data = c.reply(4096, 0)
            if h != 0x77 or err != 0:
                raise CaseFailed("READ with FUA: handle %x, %s" % (h, errname(err)))
            if data != b"\x5a" * 4096:
                raise CaseFailed("READ with FUA returned the wrong data")
            c.request(CMD_FLUSH, 0, 0, flags=CMD_FLAG_FUA)
            c.expect_error("FLUSH with FUA", 0)
            c.read_ok(0, 4096, "FUA on READ and FLUSH")
            c.close()
        return case

    def write_zeroes_flags():
        c, _, _ = conn()
        c.request(CMD_WRITE, 0, 8192, payload=b"\x12" * 8192)
        c.expect_error("write", 0)
        c.request(CMD_WRITE_ZEROES, 0, 4096, flags=CMD_FLAG_NO_HOLE | CMD_FLAG_FUA)
        c.expect_error("write_zeroes NO_HOLE|FUA", 0)
        c.request(CMD_WRITE_ZEROES, 4096, 4096, flags=CMD_FLAG_FAST_ZERO)
        h, err, _ = c.reply()
        if err not in (0, ENOTSUP):
            raise CaseFailed("write_zeroes FAST_ZERO: expected OK or ENOTSUP, got %s"
                             % errname(err))
        if c.read_ok(0, 4096) != bytes(4096):
            raise CaseFailed("write_zeroes did not zero")
        c.request(CMD_DISC, 0, 0)
        c.expect_eof("NBD_CMD_DISC")
        c.close()

    def tcp_too():
        if not args.tcp:
            return
        c = Raw(args, tcp=True)
        c.open(args.export)
        c.request(CMD_READ, size, 4096)
        c.expect_error("read beyond end over TCP", EINVAL)
        c.request(CMD_READ, 0, 4096, magic=0)
        c.expect_eof("bad magic over TCP", allow_data=True)
        c.close()

    cases = [
        ("advertised transmission flags", flags_advertised),
        ("INFO reports block sizes 1/4096/32M", info_block_size),
        ("unknown option gets ERR_UNSUP", unknown_option),
        ("INFO of unknown export gets ERR_UNKNOWN", unknown_export(OPT_INFO)),
        ("GO of unknown export gets ERR_UNKNOWN", unknown_export(OPT_GO)),
        ("EXPORT_NAME of unknown export disconnects", unknown_export_name),
        ("LIST names the exports", list_exports),
        ("LIST with data keeps the connection", list_with_data),
        ("INFO with a bad name length is refused", truncated_info),
        ("1 MiB option gets ERR_TOO_BIG", option_too_big),
        ("4 GiB option disconnects", option_absurd),
        ("bad option magic disconnects", bad_option_magic),
        ("garbage after connect disconnects", garbage_after_connect),
        ("unknown client flags disconnect", unknown_client_flags),
        ("ABORT", abort),
        ("client closes mid-handshake", close_mid_handshake),
        ("read beyond end gets EINVAL", read_beyond_end(False)),
        ("read beyond end gets EINVAL (structured)", read_beyond_end(True)),
        ("write/trim/zero beyond end get ENOSPC", write_beyond_end),
        ("writes to read-only export get EPERM", readonly_writes),
        ("unknown command gets EINVAL", unknown_command),
        ("unknown flags get EINVAL", unknown_flags(False)),
        ("unknown flags get EINVAL (structured)", unknown_flags(True)),
        ("zero-length read/write get EINVAL", zero_length),
        ("read over 32 MiB gets EINVAL", oversized_read),
        ("write over 32 MiB is discarded, EINVAL", oversized_write),
        ("write over 64 MiB disconnects", huge_write),
        ("bad request magic disconnects", bad_request_magic),
        ("garbage request disconnects", garbage_request),
        ("client closes mid-request", close_mid_request),
        ("pipelined writes, out-of-order replies", pipelined),
        ("write_zeroes flags, DISC", write_zeroes_flags),
        ("FUA on READ and FLUSH is accepted", fua_on_every_command(False)),
        ("FUA on READ and FLUSH is accepted (structured)",
         fua_on_every_command(True)),
        ("bad input over TCP", tcp_too),
    ]
    only = os.environ.get("NBDRAW_ONLY")    # a substring, for debugging
    cases = [(n, f) for n, f in cases if not only or only in n]
    for name, fn in cases:
        ck.run(name, fn)
    if ck.failures:
        print("%d of %d cases failed" % (len(ck.failures), len(cases)))
        return 1
    print("all %d cases passed" % len(cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
