#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Cache misses to a remote are in flight together, not one per worker:
# the remote (nbdkit memory behind its log filter, then its pause filter)
# is paused; a client sends 16 reads of 1 MiB of data not in wbd's cache
# at once; all 16 reach the remote while it is paused (its log shows
# them begun and none ended; nbdkit takes 16 at a time on a connection)
# and one worker of the device holds them (the read window; before, a
# worker per miss, at most max_workers = 8).  The window's estimate
# bounds read-ahead only: before, its floor of 4 MiB held these 16
# client reads to 4 at the remote.  Resumed, every read returns the
# remote's data.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_pause_filter
need_wbctl

PAUSE=$T/pause.sock
KLOG=$T/kit-requests.log
# Filters nearest the client first: the log sees a request before the
# pause holds it.
start_nbdkit kit --filter=log --filter=pause memory 64M logfile="$KLOG" \
	pause-control="$PAUSE"
KIT=$KIT_SOCK
use_pause_control "$PAUSE"

# The data, written to the remote directly: wbd's cache starts empty.
head -c 16M /dev/urandom >"$T/data"
"$PYTHON" -c 'import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1])
h.pwrite(open(sys.argv[2], "rb").read(), 0); h.flush(); h.shutdown()' \
	"$(kit_uri "$KIT")" "$T/data"

add_remote_export disk0 "$(kit_uri "$KIT")"
write_config
add_remote_settings 'io_timeout_ms = 120000;'
start_wbd

pause_ctl "$PAUSE" p
reads_pending() {
	awk '/ Read id=/ { n++ } /\.\.\.Read id=/ { d++ } END { print n - 2 * d }' "$KLOG"
}
before=$(grep -c ' Read id=' "$KLOG" || true)
"$PYTHON" - "$(uri_unix disk0)" "$T/data" "$T/reads.done" <<'PY' &
import nbd, sys
uri, path, out = sys.argv[1:4]
data = open(path, "rb").read()
h = nbd.NBD()
h.connect_uri(uri)
MiB = 1 << 20
# 16 reads of 1 MiB, every MiB of the data, out of order: no read-ahead.
offs = [((i * 7) % 16) * MiB for i in range(16)]
bufs = [nbd.Buffer(MiB) for _ in offs]
cookies = [h.aio_pread(b, o) for b, o in zip(bufs, offs)]
while h.aio_in_flight() > 0:
    h.poll(-1)
assert all(h.aio_command_completed(c) for c in cookies)
for b, o in zip(bufs, offs):
    assert b.to_bytearray() == data[o:o + MiB], "wrong data at %d" % o
open(out, "w").write("ok\n")
h.shutdown()
PY
READS_PID=$!
_PIDS+=("$READS_PID")
seen=0
for ((i = 0; i < 200; i++)); do
	seen=$(reads_pending)
	((seen >= 16)) && break
	sleep 0.1
done
status=$(remote_wbctl status --json) || fail "wbctl status failed"
busy=$("$PYTHON" -c 'import json, sys
d = json.load(sys.stdin)["devices"][0]; print(d["workers"]["busy"])' <<<"$status")
log "paused: $seen reads pending at the remote; $busy worker(s) of the device busy"
((seen >= 16)) || fail "only $seen of 16 cache misses reached the remote together"
((busy == 1)) || fail "$busy workers hold the misses, not one read window"

pause_ctl "$PAUSE" r
wait_exit "$READS_PID" 60 || fail "the reads did not end once the remote was resumed"
[[ $EXIT_STATUS == 0 && -e $T/reads.done ]] || fail "the reads failed or returned wrong data"
assert_alive
