#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# wbd tells systemd how it is doing (sd_notify), seen through a
# NOTIFY_SOCKET of the test's own: READY=1 with a STATUS= line once it
# serves; STATUS= following the dirty data and its age; WATCHDOG=1 while
# WATCHDOG_USEC is set; RELOADING=1 then READY=1 around a reload, by
# SIGHUP and by wbctl reload; STOPPING=1, then EXTEND_TIMEOUT_USEC= with
# the drain's progress, on SIGTERM.
source "${SRCDIR:?SRCDIR must name tests/service}/lib-service.sh"
need_python_nbd

add_export disk0 64M rw
write_cache_config 64M "dirty_writeback_centisecs = 0; dirty_background_ratio = 50; dirty_ratio = 60;"
start_notify_listener
export NOTIFY_SOCKET=$NOTIFY WATCHDOG_USEC=1000000
start_wbd
unset NOTIFY_SOCKET WATCHDOG_USEC

wait_note '^READY=1$' 30
ready=$NOTE_LINE
grep -q '^STATUS=1 export(s), 0 connection(s), 0 B dirty$' "$NOTES" ||
	fail "READY=1 came without the expected STATUS= line"
grep -q 'watchdog: WATCHDOG=1 every 0.5 s' "$LOG" ||
	fail "the log does not say the watchdog is on"
wait_note '^WATCHDOG=1$' 10 "$ready"
wait_note '^WATCHDOG=1$' 10 "$NOTE_LINE"

# 4 MiB written stays dirty (no periodic writeback, background at 50%):
# the next STATUS= says so, with its age.
# (libnbd, because qemu-io sends a FLUSH before it exits)
"$PYTHON" - "$(uri_unix)" <<'PY' || fail "could not write through libnbd"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(b"\xab" * (4 << 20), 0)
h.shutdown()
PY
wait_note '^STATUS=1 export\(s\), 0 connection\(s\), 4\.0 MiB dirty, oldest [0-9.]+ s$' 20

for how in SIGHUP "wbctl reload"; do
	mark=$(notes_lines)
	if [[ $how == SIGHUP ]]; then
		kill -HUP "$WBD_PID"
	else
		expect_exit 0 wbctl reload
	fi
	wait_note '^RELOADING=1$' 20 "$mark"
	grep -q "^MONOTONIC_USEC=[0-9]" <(tail -n +"$mark" "$NOTES") ||
		fail "RELOADING=1 without MONOTONIC_USEC ($how)"
	wait_note '^READY=1$' 20 "$NOTE_LINE"
	log "$how: RELOADING=1, then READY=1"
done

mark=$(notes_lines)
stop_wbd "$WBD_PID" TERM 60
[[ $EXIT_STATUS == 0 ]] || fail "wbd exited with status $EXIT_STATUS"
wait_note '^STOPPING=1$' 5 "$mark"
wait_note '^EXTEND_TIMEOUT_USEC=[0-9]+$' 5 "$NOTE_LINE"
wait_note '^STATUS=stopping: writing back 4\.0 MiB of dirty data$' 5 "$NOTE_LINE"
log "READY, STATUS, WATCHDOG, RELOADING and STOPPING as systemd expects"
