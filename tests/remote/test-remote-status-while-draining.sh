#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# wbctl status answers while the shutdown drain waits for a dead remote:
# the real status, with shutdown.stopping and shutdown.draining set and
# the bytes left to write back (shutdown.left_bytes, and the cache's
# dirty_bytes), promptly each time, in JSON and as text; a change (wbctl
# tune) is still refused as "shutting down".  Then the remote comes back
# on the same socket: the drain finishes, wbd exits 0, the remote holds
# every byte.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl
need cmp

truncate -s 8M "$T/remote.img"
start_nbdkit kit file "$T/remote.img"
add_remote_export a "$(kit_uri "$KIT_SOCK")"
write_cache_config 64M 'dirty_background_ratio = 80; dirty_ratio = 90; dirty_writeback_centisecs = 0;'
add_remote_settings 'io_timeout_ms = 300000; write_behind = false; reconnect_max_ms = 500;'
start_wbd

head -c 2M /dev/urandom >"$T/data"
"$PYTHON" - "$(uri_unix a)" "$T/data" <<'PY' || fail "see above"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(open(sys.argv[2], "rb").read(), 0)
h.shutdown()                # no FLUSH: the data stays dirty
PY
stop_kit "$KIT_PID" KILL    # the remote is gone
kill -TERM "$WBD_PID"
rc=0
wait_log 30 'shutdown: writing back' "$WBD_PID" || rc=$?
((rc != 2)) || fail "wbd exited with its remote gone"
((rc == 0)) || fail "the drain did not begin within 30 s of SIGTERM"

for round in 1 2 3; do
	t0=$(date +%s%N)
	remote_wbctl status --json >"$T/status.json" 2>"$T/status.err" ||
		fail "wbctl status during the drain: $(cat "$T/status.json" "$T/status.err")"
	ms=$((($(date +%s%N) - t0) / 1000000))
	((ms < 2000)) || fail "wbctl status took $ms ms during the drain"
	"$PYTHON" - "$T/status.json" <<'PY' || fail "see above"
import json, sys
st = json.load(open(sys.argv[1]))
sd = st.get("shutdown")
if not st.get("ok") or not sd:
    sys.exit("FAIL: no status during the drain: %r" % st)
if not sd["stopping"] or not sd["draining"]:
    sys.exit("FAIL: status does not say it is draining: %r" % sd)
if sd["left_bytes"] != 2 << 20 or sd["exports_left"] != 1:
    sys.exit("FAIL: status: %r left, expected 2 MiB in 1 export" % sd)
if st["cache"]["dirty_bytes"] + st["cache"]["writeback_bytes"] < 2 << 20:
    sys.exit("FAIL: status: the cache shows %r" % st["cache"])
if [e["name"] for e in st["exports"]] != ["a"]:
    sys.exit("FAIL: status: exports %r" % st["exports"])
PY
	sleep 1
done
log "wbctl status during the drain answered in $ms ms"
remote_wbctl status >"$T/status.txt" || fail "wbctl status (text) during the drain"
grep -q '^SHUTTING DOWN: writing back, 2.0 MiB left in 1 export(s), for ' "$T/status.txt" ||
	{ head -3 "$T/status.txt" >&2; fail "the text status does not say it is draining"; }
if remote_wbctl tune dirty_ratio=50 >"$T/tune.out" 2>&1; then
	fail "wbctl tune accepted during the drain"
fi
grep -q 'shutting down' "$T/tune.out" || fail "wbctl tune during the drain: $(cat "$T/tune.out")"
proc_alive "$WBD_PID" || fail "wbd exited with its data not written back"

start_nbdkit kit file "$T/remote.img"     # the remote is back
wait_exit "$WBD_PID" 120 || fail "wbd still running 120 s after the remote came back"
[[ $EXIT_STATUS == 0 ]] || fail "wbd exited $EXIT_STATUS, expected 0"
cmp -s -n $((2 << 20)) "$T/data" "$T/remote.img" || fail "the remote does not hold the data"
grep -q 'shutdown complete: all dirty data written back' "$LOG" || fail "no clean shutdown"
