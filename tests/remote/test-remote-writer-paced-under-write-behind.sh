#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A writer faster than a slow remote is paced with write-behind on (the
# default): write-behind moves pages under writeback as soon as they are
# written, so the writer throttle counts them with the dirty ones, as the
# kernel's counts NR_WRITEBACK.  nbdkit takes 500 ms a write, one at a
# time per connection; a client writes 16 MiB in 256 KiB writes, one at a
# time, with a 4 MiB dirty limit.  Sampled while it writes, the cache's
# dirty and under-writeback bytes stay within the limit and the request
# that crossed it; wbctl status shows writes paced (or held) and
# write-behind at work; after a FLUSH nbdkit holds every byte.  Before,
# write-behind left the dirty count near zero and no write was paced.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl

start_nbdkit slow --threads=1 --filter=delay memory 32M delay-write=500ms
SLOW=$KIT_SOCK
add_remote_export r0 "$(kit_uri "$SLOW")"
write_cache_config 64M 'dirty_background_bytes = "2M"; dirty_bytes = "4M"; dirty_writeback_centisecs = 0;'
start_wbd

"$PYTHON" - "$(uri_unix r0)" "$T/control.sock" "$T/img" <<'PY' || fail "see above"
import json, nbd, os, socket, sys, threading, time
uri, ctl, out = sys.argv[1:4]
KiB, MiB = 1 << 10, 1 << 20
limit = 4 * MiB
slack = 256 * KiB + 64 * KiB    # the request that crossed it, rounding

def status(s, rd):
    s.sendall(b'{"v": 1, "cmd": "status"}\n')
    return json.loads(rd.readline())

c = socket.socket(socket.AF_UNIX)
c.connect(ctl)
crd = c.makefile("rb")
st = status(c, crd)
if st["thresholds"]["dirty_bytes"] != limit:
    sys.exit("FAIL: the dirty limit is not 4M")
if not [d for d in st["devices"] if d["remote"]][0]["link"]["write_behind"]:
    sys.exit("FAIL: write-behind is not on for the remote")

peak = 0
writing = True
def sample():
    global peak
    while writing:
        cs = status(c, crd)["cache"]
        peak = max(peak, cs["dirty_bytes"] + cs["writeback_bytes"])
        time.sleep(0.005)
sampler = threading.Thread(target=sample)
sampler.start()

img = bytearray()
h = nbd.NBD()
h.connect_uri(uri)
try:
    for k in range(64):
        buf = os.urandom(256 * KiB)
        h.pwrite(buf, k * 256 * KiB)
        img += buf
finally:
    writing = False
    sampler.join()
st = status(c, crd)
e = [e for e in st["exports"] if e["name"] == "r0"][0]
link = [d for d in st["devices"] if d["remote"]][0]["link"]
print("peak dirty + under writeback %d KiB (limit %d KiB); %d writes "
      "paced, %d held, %d ms paused; write-behind wrote %d KiB"
      % (peak // KiB, limit // KiB, e["paced_writes"], e["held_writes"],
         e["pause_ms"], link["write_behind_bytes"] // KiB))
if peak > limit + slack:
    sys.exit("FAIL: dirty and under-writeback data reached %d KiB, past "
             "the %d KiB limit" % (peak // KiB, limit // KiB))
if e["paced_writes"] + e["held_writes"] < 1:
    sys.exit("FAIL: a writer far faster than the remote was not paced")
if link["write_behind_bytes"] <= 0:
    sys.exit("FAIL: write-behind wrote nothing")
h.flush()
h.shutdown()
c.close()
open(out, "wb").write(img)
PY
remote_wbctl status >"$T/status.txt"
grep -Eq '^  pacing +[0-9]+ write\(s\) paced, [0-9]+ held' "$T/status.txt" ||
	fail "wbctl status has no pacing line: $(cat "$T/status.txt")"
grep -Eq '^  pacing +([1-9][0-9]* write\(s\) paced|0 write\(s\) paced, [1-9][0-9]* held)' "$T/status.txt" ||
	fail "wbctl status does not show the writer paced: $(grep pacing "$T/status.txt")"
remote_read "$SLOW" 0 $((16 << 20)) "$T/remote"
cmp "$T/img" "$T/remote" || fail "nbdkit does not hold what was written"
