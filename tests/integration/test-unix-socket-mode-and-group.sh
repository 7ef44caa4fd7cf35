#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# listen.unix_mode and unix_group: the NBD Unix socket gets that mode and
# group whatever the umask, so members of the group may connect and others
# may not; without them it is 0660 (not whatever the umask leaves).
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need nbdinfo setpriv
[[ $(id -u) == 0 ]] || skip "needs root to run clients as other users"
getent group disk >/dev/null || skip "no group 'disk'"

chmod 0711 "$T"
add_export d 1M rw
LISTEN_KEYS='unix_mode = "0660"; unix_group = "disk";'
# A umask that would leave the socket to root alone, and one that would
# open it to everyone: neither counts.
umask 0077
start_wbd
umask 0022
read -r mode group < <(stat -c '%a %G' "$SOCK")
[[ $mode == 660 && $group == disk ]] || fail "socket is mode $mode group $group, expected 660 disk"
grep -q "listening on unix $SOCK (mode 0660, group disk)" "$LOG" ||
	fail "the log does not give the socket's mode and group"

log "a member of disk may connect, anyone else may not"
setpriv --reuid=1001 --regid=1001 --groups=disk nbdinfo "$(uri_unix d)" >"$T/out" 2>&1 ||
	fail "uid 1001 in group disk cannot connect: $(cat "$T/out")"
if setpriv --reuid=1001 --regid=1001 --clear-groups nbdinfo "$(uri_unix d)" >"$T/out" 2>&1; then
	fail "uid 1001 outside group disk could connect"
fi
grep -qi 'permission denied' "$T/out" || fail "expected EACCES: $(cat "$T/out")"

log "the default is 0660 whatever the umask"
SOCK2=$T/second.sock
LISTEN_KEYS=
write_config "$T/second.conf" "$SOCK2" "$(free_port)"
sed -i "s|$T/control.sock|none|" "$T/second.conf"
umask 0
spawn_wbd "$T/second.conf" "$T/second.log"
umask 0022
pid2=$SPAWNED_PID
for ((i = 0; i < 300; i++)); do
	[[ -S $SOCK2 ]] && break
	proc_alive "$pid2" || fail "the second wbd exited: $(cat "$T/second.log")"
	sleep 0.1
done
read -r mode group < <(stat -c '%a %G' "$SOCK2")
[[ $mode == 660 && $group == root ]] || fail "default socket is mode $mode group $group, expected 660 root"
assert_alive
