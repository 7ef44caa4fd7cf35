#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# In writeback mode, with periodic writeback disabled and dirty data below
# the background threshold, the backing file stays as it was (all zeroes)
# while the client writes and for a while afterwards; the moment FLUSH
# returns, the backing file is identical to what was written.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

add_export_mode disk0 16M writeback
write_cache_config 32M 'dirty_background_ratio = 80; dirty_ratio = 90; dirty_writeback_centisecs = 0;'
start_wbd

"$PYTHON" - "$(uri_unix disk0)" "$T/disk0.img" <<'PY' || fail "see above"
import nbd, os, random, sys, time
uri, backing = sys.argv[1:3]
size = 16 << 20
rng = random.Random(2)

def backing_bytes():
    with open(backing, "rb") as f:
        return f.read()

h = nbd.NBD()
h.connect_uri(uri)
shadow = bytearray(size)
for _ in range(40):
    off = rng.randrange(0, size - 200000)
    n = rng.randrange(1, 200000)
    buf = os.urandom(n)
    h.pwrite(buf, off)
    shadow[off:off + n] = buf
for off in range(0, 8 << 20, 256 << 10):     # 8 MiB sequential as well
    buf = os.urandom(256 << 10)
    h.pwrite(buf, off)
    shadow[off:off + len(buf)] = buf

for i in range(3):
    if backing_bytes().count(0) != size:
        sys.exit("FAIL: the backing file changed %d s after the writes, "
                 "without FLUSH or writeback" % i)
    time.sleep(1)

h.flush()
if backing_bytes() != shadow:
    sys.exit("FAIL: the backing file differs from the data written right "
             "after FLUSH returned")
h.shutdown()
PY
assert_alive
