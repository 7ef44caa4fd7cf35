#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The control socket: a stale socket file (left by a daemon that died) is
# replaced at start-up; a live one (another daemon owns it) makes the second
# daemon refuse to start, and the first keeps serving.  Without a daemon,
# wbctl says "is wbd running?" and exits 3.
source "${SRCDIR:-$(dirname "$0")}/lib-ctl.sh"

add_export disk0 16M rw

# No daemon, no socket file; then a stale socket file nobody accepts on.
expect_exit 3 wbctl status
assert_one_line "$ERR" "status without a daemon"
assert_match "is wbd running\? \(socket $CTL\)" "$ERR" "status without a daemon"
"$SYSPY" -c 'import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])' "$CTL"
[[ -S $CTL ]] || fail "could not make a stale socket file"
expect_exit 3 wbctl version
assert_match "is wbd running\?" "$ERR" "version on a stale socket"

start_wbd
expect_exit 0 wbctl version
[[ $(stat -c %a "$CTL") == 660 ]] || fail "control socket mode $(stat -c %a "$CTL"), expected 660"

# A second daemon on the same control socket (other NBD listeners) refuses.
CONF2=$T/second.conf
write_config "$CONF2" "$T/nbd2.sock" "$(free_port)"
spawn_wbd "$CONF2" "$T/second.log"
second=$SPAWNED_PID
wait_exit "$second" 20 || fail "a second daemon on a live control socket did not exit"
[[ $EXIT_STATUS != 0 ]] || fail "the second daemon exited 0"
grep -qi "control" "$T/second.log" || fail "the second daemon did not name the control socket: $(cat "$T/second.log")"
log "second daemon: $(grep -i control "$T/second.log" | head -n1)"
[[ -S $CTL ]] || fail "the second daemon removed the live control socket"
expect_exit 0 wbctl status
assert_match "pid $WBD_PID," "$OUT" "the first daemon still answers"

# Stopped cleanly, the daemon removes its socket; wbctl says so.
stop_wbd
[[ -e $CTL ]] && fail "the control socket is left after a clean exit"
expect_exit 3 wbctl status
# A socket path that is not a socket, or in a missing directory.
expect_exit 3 "$WBCTL" -s "$T/nonexistent/control.sock" status
: >"$T/plainfile"
expect_exit 3 "$WBCTL" -s "$T/plainfile" status
# WBD_CONTROL_SOCKET names the default socket.
WBD_CONTROL_SOCKET=$T/nowhere.sock expect_exit 3 "$WBCTL" status
assert_match "socket $T/nowhere.sock" "$ERR" "WBD_CONTROL_SOCKET"
