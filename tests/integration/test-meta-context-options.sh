#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# NBD_OPT_LIST_META_CONTEXT and NBD_OPT_SET_META_CONTEXT on a raw socket:
# the edge cases of the spec, each answered as it prescribes, with the
# connection still usable after each; and NBD_CMD_BLOCK_STATUS only for a
# context selected for the export in use.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

add_export disk0 16M rw
add_export other 4M rw
start_wbd

"$PYTHON" - "$SRCDIR" "$SOCK" <<'PY' || fail "see above"
import struct, sys
sys.path.insert(0, sys.argv[1])
from nbdraw import (Raw, CaseFailed, OPT_STRUCTURED_REPLY, REP_ACK, REP_ERR,
                    repname, NBD_STRUCTURED_REPLY_MAGIC, NBD_SIMPLE_REPLY_MAGIC,
                    CMD_READ)

LIST, SET = 9, 10
REP_META_CONTEXT = 4
ERR_INVALID, ERR_UNKNOWN, ERR_TOO_BIG = REP_ERR | 3, REP_ERR | 6, REP_ERR | 9
CMD_BLOCK_STATUS, REQ_ONE = 7, 1 << 3
EINVAL = 22

class Args:
    unix = sys.argv[2]

failures = []

def payload(name, queries, count=None):
    n = name.encode()
    out = struct.pack(">I", len(n)) + n
    out += struct.pack(">I", len(queries) if count is None else count)
    for q in queries:
        q = q.encode() if isinstance(q, str) else q
        out += struct.pack(">I", len(q)) + q
    return out

def option(c, opt, data, length=None):
    """Send OPT; returns ([(context id, name)], final reply type)."""
    c.send_option(opt, data, length)
    ctxs = []
    while True:
        ropt, rtype, d = c.option_reply()
        if ropt != opt:
            raise CaseFailed("reply for option %d to %d" % (ropt, opt))
        if rtype == REP_META_CONTEXT:
            ctxs.append((struct.unpack(">I", d[:4])[0], d[4:].decode()))
        elif rtype == REP_ACK or rtype & REP_ERR:
            return ctxs, rtype
        else:
            raise CaseFailed("unexpected reply %s" % repname(rtype))

def expect(what, got, want):
    if got != want:
        raise CaseFailed("%s: got %r, expected %r" % (what, got, want))

def structured(c):
    c.send_option(OPT_STRUCTURED_REPLY)
    expect("STRUCTURED_REPLY", c.option_replies(OPT_STRUCTURED_REPLY)[-1][0], REP_ACK)
    c.structured = True

def block_status(c, off, length, flags=0, handle=7):
    """BLOCK_STATUS; returns ({context id: [(len, flags)]}, error)."""
    c.request(CMD_BLOCK_STATUS, off, length, flags=flags, handle=handle)
    chunks, err = {}, 0
    while True:
        (magic,) = struct.unpack(">I", c.recv_exact(4))
        if magic == NBD_SIMPLE_REPLY_MAGIC:
            err, h = struct.unpack(">IQ", c.recv_exact(12))
            return chunks, err
        if magic != NBD_STRUCTURED_REPLY_MAGIC:
            raise CaseFailed("bad reply magic %x" % magic)
        rflags, rtype, h, n = struct.unpack(">HHQI", c.recv_exact(16))
        d = c.recv_exact(n)
        expect("reply handle", h, handle)
        if rtype == 5:
            cid = struct.unpack(">I", d[:4])[0]
            if cid in chunks:
                raise CaseFailed("two chunks for context %d" % cid)
            ext = [struct.unpack(">II", d[i:i + 8]) for i in range(4, n, 8)]
            chunks[cid] = ext
        elif rtype & 0x8000:
            err = struct.unpack(">I", d[:4])[0]
        else:
            raise CaseFailed("unexpected reply type %d" % rtype)
        if rflags & 1:
            return chunks, err

def run(name, body):
    """BODY(c) on a new connection past the greeting; print ok or FAIL."""
    c = Raw(Args)
    try:
        c.greeting()
        body(c)
        print("ok   " + name)
    except Exception as e:
        print("FAIL %s: %s: %s" % (name, type(e).__name__, e))
        failures.append(name)
    finally:
        c.close()

def case(name):
    """An option case: the connection is still usable after it."""
    def wrap(fn):
        def body(c):
            fn(c)
            _, t = option(c, LIST, payload("disk0", []))
            expect("a LIST after the case", t, REP_ACK)
        run(name, body)
        return fn
    return wrap

@case("LIST and SET before STRUCTURED_REPLY: ERR_INVALID")
def _(c):
    expect("SET", option(c, SET, payload("disk0", ["base:allocation"])), ([], ERR_INVALID))
    expect("LIST", option(c, LIST, payload("disk0", [])), ([], ERR_INVALID))
    structured(c)

@case("LIST: every context with no query, namespaces, unknown ones ignored")
def _(c):
    structured(c)
    expect("LIST", option(c, LIST, payload("disk0", [])),
           ([(0, "base:allocation"), (0, "wbd:dirty")], REP_ACK))
    expect("LIST base:", option(c, LIST, payload("", ["base:"])),
           ([(0, "base:allocation")], REP_ACK))
    expect("LIST unknown", option(c, LIST, payload("disk0", ["qemu:dirty-bitmap:b",
           "base:nothing", "x-foo:bar", "wbd:nothing"])), ([], REP_ACK))

@case("SET: the contexts asked for, unknown ones ignored, ids stable")
def _(c):
    structured(c)
    want = ([(1, "base:allocation"), (2, "wbd:dirty")], REP_ACK)
    q = ["qemu:dirty-bitmap:x", "wbd:dirty", "base:", "base:allocation", "x-y:z"]
    expect("SET", option(c, SET, payload("disk0", q)), want)
    expect("SET again", option(c, SET, payload("disk0", q)), want)
    expect("SET one", option(c, SET, payload("disk0", ["wbd:dirty"])),
           ([(2, "wbd:dirty")], REP_ACK))
    expect("SET none", option(c, SET, payload("disk0", [])), ([], REP_ACK))

@case("bad lengths: ERR_INVALID")
def _(c):
    structured(c)
    p = payload("disk0", ["base:allocation"])
    bad_name = struct.pack(">I", 1000) + p[4:]
    expect("name length", option(c, SET, bad_name), ([], ERR_INVALID))
    bad_query = p[:13] + struct.pack(">I", 999) + p[17:]
    expect("query length", option(c, SET, bad_query), ([], ERR_INVALID))
    expect("query count", option(c, LIST, payload("disk0", ["base:"], count=3)),
           ([], ERR_INVALID))
    expect("trailing bytes", option(c, SET, p + b"xyz"), ([], ERR_INVALID))
    expect("too short", option(c, SET, b"\0\0\0"), ([], ERR_INVALID))
    expect("no namespace", option(c, SET, payload("disk0", ["allocation"])),
           ([], ERR_INVALID))
    expect("a NUL", option(c, SET, payload("disk0", [b"base:alloc\0ation"])),
           ([], ERR_INVALID))

@case("too many queries: ERR_TOO_BIG")
def _(c):
    structured(c)
    expect("257 queries", option(c, LIST, payload("disk0", ["base:"] * 257)),
           ([], ERR_TOO_BIG))
    expect("256 queries", option(c, LIST, payload("disk0", ["base:"] * 256)),
           ([(0, "base:allocation")], REP_ACK))

@case("an unknown export: ERR_UNKNOWN")
def _(c):
    structured(c)
    expect("SET", option(c, SET, payload("nope", ["base:allocation"])), ([], ERR_UNKNOWN))
    expect("LIST", option(c, LIST, payload("nope", [])), ([], ERR_UNKNOWN))

def selected(c):
    ch, err = block_status(c, 0, 1 << 20)
    expect("error", err, 0)
    expect("contexts", sorted(ch), [1, 2])
    expect("base:allocation", ch[1], [(1 << 20, 3)])
    expect("wbd:dirty", ch[2], [(1 << 20, 0)])
    ch, err = block_status(c, 4096, 4096, REQ_ONE)
    expect("REQ_ONE", (ch, err), ({1: [(4096, 3)], 2: [(4096, 0)]}, 0))
    expect("beyond the end", block_status(c, 16 << 20, 1)[1], EINVAL)
    expect("zero length", block_status(c, 0, 0)[1], EINVAL)

def none_selected(c):
    expect("BLOCK_STATUS", block_status(c, 0, 4096), ({}, EINVAL))

def tx_case(name, sets, go, check):
    """Transmission: SETs, GO, CHECK, then a READ still works."""
    def body(c):
        structured(c)
        for exp, q, want in sets:
            _, t = option(c, SET, payload(exp, q) if q is not None else b"\0")
            expect("SET", t, want)
        rtype, _ = c.go(go)
        expect("GO", rtype, REP_ACK)
        check(c)
        c.request(CMD_READ, 0, 512, handle=9)
        expect("a READ after", c.reply(512, 0)[1], 0)
    run(name, body)

both = ["base:allocation", "wbd:dirty"]
tx_case("BLOCK_STATUS for the contexts selected", [("disk0", both, REP_ACK)],
        "disk0", selected)
tx_case("BLOCK_STATUS selected through the default name", [("", both, REP_ACK)],
        "disk0", selected)
tx_case("BLOCK_STATUS after a SET that failed: EINVAL",
        [("disk0", both, REP_ACK), ("disk0", None, ERR_INVALID)], "disk0",
        none_selected)
tx_case("BLOCK_STATUS with contexts of another export: EINVAL",
        [("other", both, REP_ACK)], "disk0", none_selected)
tx_case("BLOCK_STATUS with no context selected: EINVAL", [], "disk0",
        none_selected)

if failures:
    print("%d cases failed" % len(failures))
    sys.exit(1)
PY
assert_alive
