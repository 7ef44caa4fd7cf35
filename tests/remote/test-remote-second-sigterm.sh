#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A second SIGTERM (or a SIGINT) while the shutdown drain waits for a
# remote that does not answer gives nothing up: wbd answers it at once with
# a warning and a progress report, stays up, and exits with status 0 once
# the remote takes the data, which it then holds.  A SIGHUP then is ignored.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_pause_filter
need cmp

truncate -s 8M "$T/remote.img"
start_nbdkit kit --filter=pause file "$T/remote.img" \
	pause-control="$T/pause.ctl"
use_pause_control "$T/pause.ctl"
add_remote_export a "$(kit_uri "$KIT_SOCK")"
write_cache_config 64M 'dirty_background_ratio = 80; dirty_ratio = 90; dirty_writeback_centisecs = 0;'
add_remote_settings 'io_timeout_ms = 300000; write_behind = false;'
start_wbd

head -c 2M /dev/urandom >"$T/data"
"$PYTHON" - "$(uri_unix a)" "$T/data" <<'PY' || fail "see above"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(open(sys.argv[2], "rb").read(), 0)
h.shutdown()                # no FLUSH: the data stays dirty
PY
pause_ctl "$T/pause.ctl" p
kill -TERM "$WBD_PID"
rc=0
wait_log 30 'shutdown: writing back' "$WBD_PID" || rc=$?
((rc != 2)) || fail "wbd exited with its remote paused"
((rc == 0)) || fail "the drain did not begin within 30 s of SIGTERM"

# wait_line PATTERN: wait up to 10 s for PATTERN in the log.
wait_line() {
	local i
	for ((i = 0; i < 100; i++)); do
		grep -q "$1" "$LOG" && return 0
		sleep 0.1
	done
	fail "not in the log within 10 s: $1 (last lines: $(tail -3 "$LOG"))"
}
kill -TERM "$WBD_PID"
wait_line 'received Terminated again: still writing back; wbd exits once every dirty page is written back'
kill -INT "$WBD_PID"
wait_line 'received Interrupt again: still writing back'
kill -HUP "$WBD_PID"
sleep 0.5
proc_alive "$WBD_PID" || fail "wbd exited on a signal with its data not written back"
# Each answer comes with a report of what is left.
n_reports=$(grep -c 'stopping: writing back, .* left' "$LOG")
((n_reports >= 2)) || fail "$n_reports progress report(s) after two signals"
cmp -s -n $((2 << 20)) "$T/data" "$T/remote.img" &&
	fail "the data reached the paused remote"

pause_ctl "$T/pause.ctl" r
wait_exit "$WBD_PID" 120 || fail "wbd still running 120 s after the remote came back"
[[ $EXIT_STATUS == 0 ]] || fail "wbd exited $EXIT_STATUS, expected 0"
cmp -s -n $((2 << 20)) "$T/data" "$T/remote.img" || fail "the remote does not hold the data"
grep -q 'shutdown complete: all dirty data written back' "$LOG" || fail "no clean shutdown"
