#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The three cache modes, side by side on one daemon (periodic writeback
# disabled, background threshold out of reach):
#   writethrough             - every plain write is on the backing file when
#                              its reply arrives, before and after a FLUSH;
#   writethrough-until-flush - the same for a connection that has not sent
#                              FLUSH yet (a new connection starts over), and
#                              data stays correct after it has;
#   writeback                - a plain write is not on the backing file
#                              until FLUSH.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

add_export_mode wt 8M writethrough
add_export_mode wtuf 8M writethrough-until-flush
add_export_mode wb 8M writeback
write_cache_config 32M 'dirty_background_ratio = 80; dirty_ratio = 90; dirty_writeback_centisecs = 0;'
start_wbd

"$PYTHON" - "$SOCK" "$T" <<'PY' || fail "see above"
import nbd, os, random, sys
sock, tdir = sys.argv[1:3]
rng = random.Random(13)
size = 8 << 20

def connect(name):
    h = nbd.NBD()
    h.connect_uri("nbd+unix:///%s?socket=%s" % (name, sock))
    return h

def on_backing(name, off, n):
    with open(os.path.join(tdir, name + ".img"), "rb") as f:
        f.seek(off)
        return f.read(n)

def writes(count):
    out = [(0, 4096), (5000, 3), (size - 4096, 4096)]
    while len(out) < count:
        out.append((rng.randrange(size - 30000), rng.randrange(1, 30000)))
    return out

def write_durable(h, name, what):
    for off, n in writes(25):
        buf = os.urandom(n)
        h.pwrite(buf, off)
        if on_backing(name, off, n) != buf:
            sys.exit("FAIL: %s: %s: write [%d, +%d) not on the backing file "
                     "when its reply arrived" % (name, what, off, n))
        if h.pread(n, off) != buf:
            sys.exit("FAIL: %s: %s: write [%d, +%d) does not read back"
                     % (name, what, off, n))

# writethrough: always.
h = connect("wt")
write_durable(h, "wt", "before FLUSH")
h.flush()
write_durable(h, "wt", "after FLUSH")
h.shutdown()

# writethrough-until-flush: until this connection's first FLUSH.
h = connect("wtuf")
write_durable(h, "wtuf", "before the first FLUSH")
h2 = connect("wtuf")
h.flush()
shadow = bytearray(h.pread(size, 0))
for off, n in writes(40):
    buf = os.urandom(n)
    h.pwrite(buf, off)
    shadow[off:off + n] = buf
if h.pread(size, 0) != shadow:
    sys.exit("FAIL: wtuf: data written after FLUSH does not read back")
# Another connection that has never flushed still gets writethrough.
write_durable(h2, "wtuf", "second connection, never flushed")
h3 = connect("wtuf")
write_durable(h3, "wtuf", "new connection after another's FLUSH")
shadow = bytearray(h3.pread(size, 0))
h.flush()
if on_backing("wtuf", 0, size) != shadow:
    sys.exit("FAIL: wtuf: after FLUSH the backing file differs")
for x in (h, h2, h3):
    x.shutdown()

# writeback: a plain write waits for FLUSH.
h = connect("wb")
buf = os.urandom(1 << 20)
h.pwrite(buf, 1 << 20)
if on_backing("wb", 1 << 20, 1 << 20) != bytes(1 << 20):
    sys.exit("FAIL: wb: a plain write reached the backing file before FLUSH")
h.flush()
if on_backing("wb", 1 << 20, 1 << 20) != buf:
    sys.exit("FAIL: wb: after FLUSH the write is not on the backing file")
h.shutdown()
PY
assert_alive
