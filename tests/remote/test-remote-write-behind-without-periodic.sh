#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Write-behind resumes when the foreground work it yielded to ends, with
# periodic writeback off (dirty_writeback_centisecs = 0).  A reader keeps
# 16 cache misses in flight, 50 ms each, on a remote of 256 MiB (random
# pages: almost every read a miss), so the device is never idle while a
# writer puts 2 MiB of scattered 4K pages in [0, 4M): write-behind yields
# to the reads throughout, and the writes leave it owed.  2 s after the
# writer the reader stops too, with no FLUSH and no write after it.  The
# data must be dirty then (else the reads did not hold write-behind back
# and the test proves nothing), and every byte must reach nbdkit on its
# own within 10 s, long before the thresholds (50 %) or the expiry (30 s)
# would send it.  Without wb_foreground_done (the end of the last read
# resumes the write-behind it was owed) nothing comes to resume it: a
# write or the periodic pass would, and here neither does.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl

start_nbdkit slow --filter=delay memory 256M delay-write=20ms delay-read=50ms
SLOW=$KIT_SOCK
add_remote_export slow "$(kit_uri "$SLOW")"
write_cache_config 256M 'dirty_background_ratio = 50; dirty_ratio = 60; dirty_expire_centisecs = 3000; dirty_writeback_centisecs = 0;'
start_wbd

# The image written into $T/img.
"$PYTHON" - "$(uri_unix slow)" "$T/control.sock" "$T/img" <<'PY' || fail "see above"
import json, nbd, os, random, socket, sys, threading, time
uri, ctl, out = sys.argv[1:4]
random.seed(7)
pages = random.sample(range(0, 1024), 512)
img = bytearray(4 << 20)
done = threading.Event()
error = []

def status():
    c = socket.socket(socket.AF_UNIX)
    c.connect(ctl)
    c.sendall(b'{"v": 1, "cmd": "status"}\n')
    st = json.loads(c.makefile("rb").readline())
    c.close()
    return st

def reader():
    try:
        h = nbd.NBD()
        h.connect_uri(uri)
        # Staggered, 4 ms apart: the reads end and are replaced one at a
        # time, never all at once.  Sent together, all 16 ended
        # together, and write-behind took the device in the gap before
        # the next 16 came (the test failed 2 runs in 4 on a fast host).
        for i in range(16):
            h.aio_pread(nbd.Buffer(4096), (32 << 20) +
                        random.randrange(57344) * 4096)
            time.sleep(0.004)
        until = None
        while until is None or time.monotonic() < until:
            if done.is_set() and until is None:
                until = time.monotonic() + 2
            while h.aio_in_flight() < 16:
                h.aio_pread(nbd.Buffer(4096), (32 << 20) +
                            random.randrange(57344) * 4096)
            h.poll(-1)
        while h.aio_in_flight() > 0:
            h.poll(-1)
        h.shutdown()
    except Exception as e:  # any: a reader gone is no reader at all
        error.append(repr(e))

r = threading.Thread(target=reader)
r.start()
time.sleep(0.5)
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
time.sleep(1)
st = status()
left = st["cache"]["dirty_bytes"] + st["cache"]["writeback_bytes"]
behind = [d for d in st["devices"] if d["remote"]][0]["link"]["write_behind_bytes"]
r.join()
if error:
    sys.exit("FAIL: a read failed: %s" % error[0])
print("1 s after the writer, with the reads going on: %d KiB dirty or "
      "under writeback; write-behind had written %d KiB"
      % (left // 1024, behind // 1024))
if left == 0:
    sys.exit("FAIL: the reads did not hold write-behind back: nothing was "
             "left for their end to resume")
open(out, "wb").write(img)
PY

# Nothing comes now: no write, no FLUSH, no periodic pass.
wait_clean 10
remote_read "$SLOW" 0 $((4 << 20)) "$T/remote"
cmp "$T/img" "$T/remote" || fail "nbdkit does not hold what was written"
