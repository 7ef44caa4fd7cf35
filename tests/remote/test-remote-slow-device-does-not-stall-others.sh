#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A remote slowed by nbdkit's delay filter (2 s per write) is busy with a
# FLUSH of 4 MiB; meanwhile writes and FLUSHes to an export on
# another device (a local file) keep going at their normal pace: they all
# finish while the slow FLUSH is still running.  Then the slow FLUSH
# completes and nbdkit holds its data.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd

start_nbdkit slow --filter=delay memory 64M delay-write=2
SLOW=$KIT_SOCK
add_remote_export slow "$(kit_uri "$SLOW")"
add_export fast 64M rw
write_cache_config 256M 'dirty_background_ratio = 50; dirty_ratio = 60; dirty_writeback_centisecs = 0;'
start_wbd

head -c 4M /dev/urandom >"$T/slowdata"
# The slow FLUSH, in the background: it writes 4 MiB at 2 s a request.
"$PYTHON" - "$(uri_unix slow)" "$T/slowdata" "$T/slow-done" <<'PY' &
import nbd, sys, time
uri, path, done = sys.argv[1:4]
data = open(path, "rb").read()
h = nbd.NBD()
h.connect_uri(uri)
h.pwrite(data, 0)
t0 = time.monotonic()
h.flush()
open(done, "w").write("%.2f\n" % (time.monotonic() - t0))
h.shutdown()
PY
SLOW_PY=$!
_PIDS+=("$SLOW_PY")
sleep 1
[[ -e $T/slow-done ]] && fail "the slow FLUSH finished at once; the remote is not slow"

# 20 rounds of write + FLUSH on the fast device, timed.
"$PYTHON" - "$(uri_unix fast)" "$T/fast-took" <<'PY' || fail "fast export failed"
import nbd, os, sys, time
uri, out = sys.argv[1:3]
h = nbd.NBD()
h.connect_uri(uri)
t0 = time.monotonic()
for i in range(20):
    h.pwrite(os.urandom(256 << 10), i << 20)
    h.flush()
open(out, "w").write("%.2f\n" % (time.monotonic() - t0))
h.shutdown()
PY
took=$(cat "$T/fast-took")
log "20 write+FLUSH rounds on the fast device took ${took}s"
[[ -e $T/slow-done ]] &&
	fail "the slow FLUSH finished ($(cat "$T/slow-done") s) before the fast device's work: nothing shown"
awk -v t="$took" 'BEGIN { exit !(t < 4.0) }' ||
	fail "the fast device's 20 write+FLUSH rounds took ${took}s while another device was slow"

wait_exit "$SLOW_PY" 120 || fail "the slow FLUSH did not finish within 120 s"
((EXIT_STATUS == 0)) || fail "the slow FLUSH failed"
log "the slow FLUSH took $(cat "$T/slow-done")s"
remote_read "$SLOW" 0 $((4 << 20)) "$T/slow-remote"
cmp "$T/slowdata" "$T/slow-remote" || fail "nbdkit does not hold the slow export's data"
