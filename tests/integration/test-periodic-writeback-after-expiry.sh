#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Periodic writeback writes out data older than dirty_expire_centisecs
# without any FLUSH: with expiry 1 s and a pass every 0.5 s (and the
# background threshold out of reach), the backing file comes to hold what
# was written within a bounded time, while the client stays connected and
# idle.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

add_export_mode disk0 16M writeback
write_cache_config 32M 'dirty_background_ratio = 80; dirty_ratio = 90; dirty_expire_centisecs = 100; dirty_writeback_centisecs = 50;'
start_wbd

"$PYTHON" - "$(uri_unix disk0)" "$T/disk0.img" <<'PY' || fail "see above"
import nbd, os, random, sys, time
uri, backing = sys.argv[1:3]
size = 16 << 20
rng = random.Random(3)

h = nbd.NBD()
h.connect_uri(uri)
shadow = bytearray(size)
for _ in range(60):
    off = rng.randrange(0, size - 100000)
    n = rng.randrange(1, 100000)
    buf = os.urandom(n)
    h.pwrite(buf, off)
    shadow[off:off + n] = buf

start = time.monotonic()
while True:
    with open(backing, "rb") as f:
        data = f.read()
    if data == shadow:
        break
    if time.monotonic() - start > 15:
        same = sum(1 for p in range(0, size, 4096)
                   if data[p:p + 4096] == shadow[p:p + 4096])
        sys.exit("FAIL: 15 s after the writes (expiry 1 s, pass every "
                 "0.5 s) the backing file still differs: %d of %d pages "
                 "match" % (same, size // 4096))
    time.sleep(0.2)
print("periodic writeback done after %.1f s" % (time.monotonic() - start))
# The connection is still usable and the data still reads back.
if h.pread(size, 0) != shadow:
    sys.exit("FAIL: data read back after periodic writeback differs")
h.shutdown()
PY
assert_alive
