#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A write larger than the whole cache (32 MiB, and one of 32 MiB at an
# unaligned offset, into a 4 MiB cache) completes: its writer writes its
# own first pages back to make room and goes on from where it stopped,
# never copying the write again from its start (which evicted its own
# last pages and took about a minute for 32 MiB here).  The data reads
# back whole, through wbd and on the backing file after a FLUSH, and the
# wait is logged at most once a second.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

add_export_mode disk0 128M writeback
write_cache_config 4M ''
start_wbd

"$PYTHON" - "$(uri_unix disk0)" "$T/disk0.img" <<'PY' || fail "see above"
import nbd, os, sys, time
uri, backing = sys.argv[1:3]
h = nbd.NBD()
h.connect_uri(uri)
writes = [(0, os.urandom(32 << 20)), ((64 << 20) + 512, os.urandom(32 << 20))]
for off, data in writes:
    t = time.monotonic()
    h.pwrite(data, off)
    took = time.monotonic() - t
    print("%d MiB at %d: %.2f s" % (len(data) >> 20, off, took))
    # Not a benchmark: a bound a hang (or a start-over per page) exceeds.
    if took > 20:
        sys.exit("FAIL: a write 8 times the cache took %.1f s" % took)
h.flush()
for off, data in writes:
    if h.pread(len(data), off) != data:
        sys.exit("FAIL: the write at %d does not read back through wbd" % off)
h.shutdown()
with open(backing, "rb") as f:
    for off, data in writes:
        f.seek(off)
        if f.read(len(data)) != data:
            sys.exit("FAIL: the write at %d is not on the backing file after FLUSH" % off)
PY
n=$(grep -c 'waiting for cache space' "$LOG" || true)
((n <= 25)) || fail "the wait for cache space was logged $n times in a few seconds"
log "two 32 MiB writes through a 4 MiB cache: complete, read back, $n wait line(s)"
assert_alive
stop_wbd
