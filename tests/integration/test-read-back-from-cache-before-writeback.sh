#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Data written in writeback mode is read back from the cache before it has
# been written back: with periodic writeback disabled and the background
# threshold far away, the backing file is still all zeroes, yet every read
# through wbd (on the writing connection and on a second one) returns what
# was written -- unaligned ranges included.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

add_export_mode disk0 16M writeback
write_cache_config 32M 'dirty_background_ratio = 80; dirty_ratio = 90; dirty_writeback_centisecs = 0;'
start_wbd

"$PYTHON" - "$(uri_unix disk0)" "$(uri_tcp disk0)" "$T/disk0.img" <<'PY' || fail "see above"
import nbd, os, random, sys
uri_unix, uri_tcp, backing = sys.argv[1:4]
size = 16 << 20
rng = random.Random(1)

def check_backing_zero(what):
    with open(backing, "rb") as f:
        data = f.read()
    if len(data) != size or data.count(0) != size:
        sys.exit("FAIL: the backing file changed before any writeback (%s)" % what)

h = nbd.NBD()
h.connect_uri(uri_unix)
shadow = bytearray(size)
# Whole pages, a large run, unaligned pieces, the last page, a single byte.
writes = [(0, 4096), (8192, 1 << 20), (3 << 20, 777), ((5 << 20) + 123, 50000),
          (size - 4096, 4096), ((9 << 20) + 1, 1)]
for _ in range(50):
    writes.append((rng.randrange(size - 70000), rng.randrange(1, 70000)))
for off, n in writes:
    buf = os.urandom(n)
    h.pwrite(buf, off)
    shadow[off:off + n] = buf

check_backing_zero("after the writes")
for off, n in writes:
    if h.pread(n, off) != shadow[off:off + n]:
        sys.exit("FAIL: reading back [%d, +%d) on the writing connection "
                 "does not return the data written" % (off, n))

h2 = nbd.NBD()
h2.connect_uri(uri_tcp)
for off in range(0, size, 1 << 20):
    if h2.pread(1 << 20, off) != shadow[off:off + (1 << 20)]:
        sys.exit("FAIL: a second connection reads other data at %d" % off)
# Odd-sized reads straddling pages.
for _ in range(200):
    off = rng.randrange(size - 10000)
    n = rng.randrange(1, 10000)
    if h2.pread(n, off) != shadow[off:off + n]:
        sys.exit("FAIL: unaligned read [%d, +%d) differs" % (off, n))
check_backing_zero("after the reads")
h.shutdown()
h2.shutdown()
PY
assert_alive
