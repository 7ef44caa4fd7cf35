#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Write-behind resumes when the foreground work it yielded to ends, with
# periodic writeback off (dirty_writeback_centisecs = 0): scattered writes
# while another client reads misses (write-behind yields to each), then
# both stop, with no FLUSH and no write after them.  Every byte must
# still reach nbdkit on its own, long before the thresholds (50 %) or the
# expiry (30 s) would send it.  Before, the write-behind that yielded to
# the last miss was resumed only by a write or the periodic pass, and
# here neither comes.  (With wb_foreground_done made a no-op this test
# still passed once: something else resumed the write-behind here, not
# yet found, so it shows the behaviour, not yet the stall; issue 27.)
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl

start_nbdkit slow --filter=delay memory 64M delay-write=20ms delay-read=5ms
SLOW=$KIT_SOCK
add_remote_export slow "$(kit_uri "$SLOW")"
write_cache_config 256M 'dirty_background_ratio = 50; dirty_ratio = 60; dirty_expire_centisecs = 3000; dirty_writeback_centisecs = 0;'
start_wbd

# A writer of 2 MiB of scattered 4K pages in [0, 4M) and a reader of
# misses in [32M, 64M), 4 in flight, until 2 s after the writer is done.
# No FLUSH.  The image written into $T/img.
"$PYTHON" - "$(uri_unix slow)" "$T/img" <<'PY' || fail "the writes or the reads failed"
import nbd, os, random, sys, threading, time
uri, out = sys.argv[1:3]
random.seed(7)
pages = random.sample(range(0, 1024), 512)
img = bytearray(4 << 20)
done = threading.Event()

def reader():
    h = nbd.NBD()
    h.connect_uri(uri)
    until = None
    while until is None or time.monotonic() < until:
        if done.is_set() and until is None:
            until = time.monotonic() + 2
        while h.aio_in_flight() < 4:
            h.aio_pread(4096, (32 << 20) + random.randrange(8192) * 4096)
        h.poll(-1)
    while h.aio_in_flight() > 0:
        h.poll(-1)
    h.shutdown()

r = threading.Thread(target=reader)
r.start()
time.sleep(0.2)
h = nbd.NBD()
h.connect_uri(uri)
for p in pages:
    buf = os.urandom(4096)
    img[p * 4096:(p + 1) * 4096] = buf
    h.aio_pwrite(buf, p * 4096)
    while h.aio_in_flight() > 8:
        h.poll(-1)
while h.aio_in_flight() > 0:
    h.poll(-1)
h.shutdown()
done.set()
r.join()
open(out, "wb").write(img)
PY

behind=$(remote_wbctl status --json | "$PYTHON" -c 'import json, sys
d = [d for d in json.load(sys.stdin)["devices"] if d["remote"]][0]
print(d["link"]["write_behind_bytes"])')
log "write-behind had written $behind bytes when the reader stopped"
# Nothing comes now: no write, no FLUSH, no periodic pass.
wait_clean 20
remote_read "$SLOW" 0 $((4 << 20)) "$T/remote"
cmp "$T/img" "$T/remote" || fail "nbdkit does not hold what was written"
