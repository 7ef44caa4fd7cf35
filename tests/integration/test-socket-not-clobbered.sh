#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A second wbd given a Unix socket path (or a TCP address) that a running
# wbd serves fails clearly and does not take it over; the first keeps
# serving.  A stale socket left by a killed daemon does not stop a new one.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need nbdinfo

add_export disk0 64M rw
start_wbd
first=$WBD_PID

# The second daemon: same socket path, its own port and export.
_EXPORTS=()
add_export other 32M rw "" "$T/other.img"
port2=$(free_port)
write_config "$T/second.conf" "$SOCK" "$port2"

log "second daemon on the same socket"
spawn_wbd "$T/second.conf" "$T/second.log"
second=$SPAWNED_PID
if ! wait_exit "$second" 20; then
	fail "the second wbd on $SOCK is still running after 20 s; it should have refused"
fi
[[ $EXIT_STATUS != 0 ]] || fail "the second wbd on $SOCK exited 0; expected a failure"
grep -Eqi "$SOCK|in use|already|address" "$T/second.log" ||
	fail "the second wbd's error does not say what is wrong: $(cat "$T/second.log")"
log "second daemon said: $(head -n 3 "$T/second.log")"

assert_alive "$first"
[[ -S $SOCK ]] || fail "$SOCK was removed by the second daemon"
size=$(nbdinfo --size "$(uri_unix disk0)") || fail "the first daemon no longer serves $SOCK"
[[ $size == 67108864 ]] || fail "$SOCK now serves an export of $size bytes, not the first daemon's"

log "second daemon on the same TCP port"
write_config "$T/third.conf" "$T/third.sock" "$PORT"
spawn_wbd "$T/third.conf" "$T/third.log"
third=$SPAWNED_PID
wait_exit "$third" 20 || fail "a wbd on the busy port $PORT is still running after 20 s"
[[ $EXIT_STATUS != 0 ]] || fail "a wbd on the busy port $PORT exited 0"
size=$(nbdinfo --size "$(uri_tcp disk0)") || fail "the first daemon no longer serves port $PORT"
[[ $size == 67108864 ]] || fail "port $PORT serves an export of $size bytes"
assert_alive "$first"

log "stale socket after SIGKILL"
kill -KILL "$first"
wait_exit "$first" 10 || fail "wbd survived SIGKILL"
[[ -e $SOCK ]] || log "(the killed daemon left no socket file)"
start_wbd
size=$(nbdinfo --size "$(uri_unix disk0)") || fail "a new wbd does not serve $SOCK after a stale socket"
[[ $size == 67108864 ]] || fail "new daemon: size $size"
