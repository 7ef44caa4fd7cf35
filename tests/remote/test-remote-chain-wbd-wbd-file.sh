#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A chain: client -> wbd "front" -> wbd "back" (an NBD server like any
# other) -> a file.  Data flushed at the front is in the file; a SIGTERM to
# both (front first) writes everything back.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need nbdcopy

# The back wbd: a file export on its own socket and port.
BACK_SOCK=$T/back.sock
add_export disk0 32M rw "" "$T/back.img"
write_config "$T/back.conf" "$BACK_SOCK" "$(free_port)"
sed -i "s|^control = .*|control = { socket = \"$T/back-control.sock\"; };|" "$T/back.conf"
spawn_wbd "$T/back.conf" "$T/back.log"
BACK_PID=$SPAWNED_PID
for ((i = 0; i < 100; i++)); do
	[[ -S $BACK_SOCK ]] && break
	sleep 0.1
done
[[ -S $BACK_SOCK ]] || fail "the back wbd did not start: $(cat "$T/back.log")"

# The front wbd, backed by the back one.
_EXPORTS=()
add_remote_export front "$(uri_unix disk0 "$BACK_SOCK")"
write_config
start_wbd
grep -q 'export "front": nbd .*device 43:0' "$LOG" ||
	fail "the front export is not on device 43:0"

head -c 24M /dev/urandom >"$T/data"
nbdcopy --flush "$T/data" "$(uri_unix front)" || fail "nbdcopy into the chain failed"
cmp -n $((24 << 20)) "$T/data" "$T/back.img" ||
	fail "after FLUSH at the front, the file at the end of the chain differs"

# Unflushed data: SIGTERM the front, then the back; both write back.
head -c 4M /dev/urandom >"$T/more"
nbdcopy "$T/more" "$(uri_unix front)" || fail "second nbdcopy failed"
stop_wbd "$WBD_PID"
((EXIT_STATUS == 0)) || fail "front wbd exited $EXIT_STATUS"
stop_wbd "$BACK_PID"
((EXIT_STATUS == 0)) || fail "back wbd exited $EXIT_STATUS"
cmp -n $((4 << 20)) "$T/more" "$T/back.img" ||
	fail "data written back at shutdown did not reach the file"
