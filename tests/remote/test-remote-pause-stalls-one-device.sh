#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A remote that stops answering stalls only its own device.  nbdkit's
# pause filter on server A: A is paused first, then 16 MiB are written to
# A's export (into the cache: nothing goes to A yet) and a FLUSH starts
# writing them back, so its writes hang at A -- seen in wbctl status as
# data under writeback, not assumed from timing (pausing A after the FLUSH
# began raced it: under load the FLUSH could finish before the pause was
# acknowledged, which waits for the writes already at A).  While A is
# paused: three rounds of 8 MiB + FLUSH to an export on server B each
# finish within 10 s, a read of uncached data from B succeeds, wbctl status
# answers within 5 s and shows A's device with data still to write and
# still connected -- and A's FLUSH is still waiting.  Then A is resumed:
# its FLUSH succeeds and A's nbdkit, read directly, holds the data.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl
need_pause_filter

PAUSE=$T/pause.sock
# Filters nearest the client first: pause, then the delay.
start_nbdkit a --filter=pause --filter=delay memory 64M \
	pause-control="$PAUSE" delay-write=250ms
A=$KIT_SOCK
start_nbdkit b memory 64M
B=$KIT_SOCK
use_pause_control "$PAUSE"

add_remote_export a "$(kit_uri "$A")"
add_remote_export b "$(kit_uri "$B")"
write_cache_config 128M 'dirty_background_bytes = "32M"; dirty_bytes = "64M"; dirty_writeback_centisecs = 0;'
# Hanging requests must not count as a dead connection here.
add_remote_settings 'io_timeout_ms = 120000;'
start_wbd
[[ $(export_device a) == 43:0 && $(export_device b) == 43:1 ]] ||
	fail "expected a on 43:0 and b on 43:1: $(grep 'export "' "$LOG")"

head -c 16M /dev/urandom >"$T/a-data"
log "pausing server a"
pause_ctl "$PAUSE" p 30 || fail "could not pause server a"
# Write A's data (it stays in the cache), then FLUSH it in the background:
# its writeback goes to the paused A and hangs there.
"$PYTHON" - "$(uri_unix a)" "$T/a-data" "$T/a-flush" <<'PY' &
import nbd, sys, time
uri, path, out = sys.argv[1:4]
data = open(path, "rb").read()
h = nbd.NBD()
h.connect_uri(uri)
for off in range(0, len(data), 1 << 20):
    h.pwrite(data[off:off + (1 << 20)], off)
open(out + ".written", "w").write("1\n")
t0 = time.monotonic()
try:
    h.flush()
    open(out, "w").write("ok %.2f\n" % (time.monotonic() - t0))
except nbd.Error as e:
    open(out, "w").write("error %s\n" % e)
h.shutdown()
PY
AFLUSH_PID=$!
_PIDS+=("$AFLUSH_PID")
for ((i = 0; i < 100; i++)); do
	[[ -e $T/a-flush.written ]] && break
	sleep 0.1
done
[[ -e $T/a-flush.written ]] || fail "writing 16 MiB to a did not finish within 10 s"
# The FLUSH has begun once a's writes are under writeback (sent to A).
for ((i = 0; i < 300; i++)); do
	wb=$("$WBCTL" -s "$T/control.sock" status --json |
		jq '.devices[] | select(.device == "43:0") | .writeback_bytes')
	((wb > 0)) && break
	sleep 0.1
done
((wb > 0)) || fail "a's FLUSH sent nothing to a within 30 s"
log "a's FLUSH is writing back to the paused server ($wb bytes under writeback)"
[[ -e $T/a-flush ]] &&
	fail "a's FLUSH finished while a was paused ($(cat "$T/a-flush"))"

"$PYTHON" - "$WBCTL" "$T/control.sock" "$(uri_unix b)" "$(kit_uri "$B")" \
	"$T/a-flush" <<'PY' || fail "see above"
import json, nbd, os, subprocess, sys, time
wbctl, ctl, uri_b, kit_b, a_flush = sys.argv[1:6]
MiB = 1 << 20

def status():
    t0 = time.monotonic()
    try:
        out = subprocess.run([wbctl, "-s", ctl, "status", "--json"],
                             check=True, capture_output=True,
                             timeout=5).stdout
    except subprocess.TimeoutExpired:
        sys.exit("FAIL: wbctl status did not answer within 5 s while a "
                 "is paused")
    return json.loads(out), time.monotonic() - t0

def dev(st, name):
    return [d for d in st["devices"] if d["device"] == name][0]

st, took = status()
a = dev(st, "43:0")
pending = a["dirty_bytes"] + a["writeback_bytes"]
print("pause: a paused: %.1f MiB dirty, %.1f MiB under writeback; status "
      "in %.2f s" % (a["dirty_bytes"] / MiB, a["writeback_bytes"] / MiB, took))
if pending == 0:
    sys.exit("FAIL: a's device has nothing left to write while paused: "
             "the pause came too late to show anything")

# Pre-load B's nbdkit directly, so that reading it through wbd is a miss.
kit = nbd.NBD()
kit.connect_uri(kit_b)
cold = os.urandom(4 * MiB)
kit.pwrite(cold, 48 * MiB)
kit.shutdown()

h = nbd.NBD()
h.connect_uri(uri_b)
data = os.urandom(24 * MiB)
for r in range(3):
    t0 = time.monotonic()
    for off in range(r * 8 * MiB, (r + 1) * 8 * MiB, MiB):
        h.pwrite(data[off:off + MiB], off)
    h.flush()
    took = time.monotonic() - t0
    print("pause: round %d on b: 8 MiB + FLUSH in %.2f s" % (r, took))
    if took > 10:
        sys.exit("FAIL: 8 MiB + FLUSH on b took %.1f s while a is paused"
                 % took)
t0 = time.monotonic()
if h.pread(4 * MiB, 48 * MiB) != cold:
    sys.exit("FAIL: a cache-missing read from b returned wrong data")
if time.monotonic() - t0 > 10:
    sys.exit("FAIL: a cache-missing read from b took %.1f s"
             % (time.monotonic() - t0))
h.shutdown()

kit = nbd.NBD()
kit.connect_uri(kit_b)
if kit.pread(24 * MiB, 0) != data:
    sys.exit("FAIL: b's nbdkit does not hold what was flushed on b")
kit.shutdown()

st, took = status()
a = dev(st, "43:0")
if a["dirty_bytes"] + a["writeback_bytes"] == 0:
    sys.exit("FAIL: a's device has nothing left to write: a was not stalled")
if not a["remote"] or not a["remote"]["connected"]:
    sys.exit("FAIL: a's device is not shown connected: %s" % a["remote"])
if os.path.exists(a_flush):
    sys.exit("FAIL: a's FLUSH finished while a was paused: %s"
             % open(a_flush).read().strip())
print("pause: still paused: a %.1f MiB to write; status in %.2f s"
      % ((a["dirty_bytes"] + a["writeback_bytes"]) / MiB, took))
PY

log "resuming server a"
pause_ctl "$PAUSE" r 10 || fail "could not resume server a"
wait_exit "$AFLUSH_PID" 60 || fail "a's FLUSH did not finish within 60 s of the resume"
((EXIT_STATUS == 0)) || fail "the writer to a failed"
read -r what secs <"$T/a-flush"
[[ $what == ok ]] || fail "a's FLUSH failed after the resume: $(cat "$T/a-flush")"
log "a's FLUSH returned after ${secs}s"
remote_read "$A" 0 $((16 << 20)) "$T/a-remote"
cmp "$T/a-data" "$T/a-remote" || fail "a's nbdkit does not hold a's data after the resume"
grep -q 'disconnected' "$LOG" && fail "a pause was taken for a disconnection"
assert_alive
