#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Background writeback starts when dirty data crosses
# dirty_background_bytes, not before, and runs oldest-first until dirty data
# is back below it -- without any FLUSH, with periodic writeback disabled.
# Cache 32M, background threshold 4M, dirty limit 16M: 2M of dirty data
# leaves the backing file untouched; 12M makes wbd write back at least the
# 8M above the threshold, starting with the oldest data.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

add_export_mode disk0 32M writeback
write_cache_config 32M 'dirty_background_bytes = "4M"; dirty_bytes = "16M"; dirty_writeback_centisecs = 0;'
start_wbd

"$PYTHON" - "$(uri_unix disk0)" "$T/disk0.img" <<'PY' || fail "see above"
import nbd, os, sys, time
uri, backing = sys.argv[1:3]
MiB = 1 << 20
chunk = 256 << 10

def backing_bytes():
    with open(backing, "rb") as f:
        return f.read()

def pages_on_backing(data, upto):
    return sum(1 for p in range(0, upto, 4096)
               if data[p:p + 4096] == shadow[p:p + 4096])

h = nbd.NBD()
h.connect_uri(uri)
shadow = bytearray(32 * MiB)

def write_upto(end, start):
    for off in range(start, end, chunk):
        buf = os.urandom(chunk)
        h.pwrite(buf, off)
        shadow[off:off + chunk] = buf

write_upto(2 * MiB, 0)
time.sleep(2)
if backing_bytes().count(0) != len(shadow):
    sys.exit("FAIL: with 2M dirty (background threshold 4M) the backing "
             "file was written to")

write_upto(12 * MiB, 2 * MiB)
# At least 12M - 4M must go back; the oldest first (the first 2M).
need = (8 * MiB) // 4096
start = time.monotonic()
while True:
    data = backing_bytes()
    done = pages_on_backing(data, 12 * MiB)
    if done >= need:
        break
    if time.monotonic() - start > 15:
        sys.exit("FAIL: with 12M dirty (background threshold 4M) only %d "
                 "KiB reached the backing file in 15 s, expected at least "
                 "8M" % (done * 4))
    time.sleep(0.2)
print("background writeback: %d KiB on the backing file after %.1f s"
      % (done * 4, time.monotonic() - start))
if data[:2 * MiB] != shadow[:2 * MiB]:
    sys.exit("FAIL: background writeback did not write the oldest data "
             "(the first 2M written) first")
# Nothing but written data ever reaches the backing file.
for p in range(0, 32 * MiB, 4096):
    page = data[p:p + 4096]
    if page != shadow[p:p + 4096] and page.count(0) != 4096:
        sys.exit("FAIL: page at %d on the backing file is neither the old "
                 "zeroes nor the data written" % p)

h.flush()
if backing_bytes() != shadow:
    sys.exit("FAIL: after FLUSH the backing file differs from the data")
h.shutdown()
PY
assert_alive
