#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Allow lists over the Unix socket: uid:N, user:NAME and group:NAME admit
# the clients they name (by the credentials the kernel gives for the
# socket; a group as the effective gid or a supplementary one) and refuse
# the others with a log line saying who; an address entry matches no Unix
# client, a uid entry no TCP client; LIST shows a client only what it may
# open.  Clients are nbdinfo run as other users with setpriv.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need nbdinfo setpriv jq
[[ $(id -u) == 0 ]] || skip "needs root to run clients as other users"
getent group disk >/dev/null || skip "no group 'disk'"
getent passwd nobody >/dev/null || skip "no user 'nobody'"
DISK=$(getent group disk | cut -d: -f3)
NOBODY=$(id -u nobody)

# Others may reach the socket; the allow lists decide.
chmod 0711 "$T"
LISTEN_KEYS='unix_mode = "0666";'
add_export_allow by-uid 1M uid:1000
add_export_allow by-user 1M user:nobody
add_export_allow by-group 1M group:disk
add_export_allow by-address 1M 127.0.0.1 ::1
add_export_allow no-one 1M
add_export open 1M rw
start_wbd

# as UID GID GROUPS CMD...: run CMD with those credentials (GROUPS: a
# comma-separated list, or "" for none).
as() {
	local uid=$1 gid=$2 groups=$3
	shift 3
	if [[ -n $groups ]]; then
		setpriv --reuid="$uid" --regid="$gid" --groups="$groups" "$@"
	else
		setpriv --reuid="$uid" --regid="$gid" --clear-groups "$@"
	fi
}

# admitted EXPORT UID GID GROUPS / refused EXPORT UID GID GROUPS
admitted() {
	as "$2" "$3" "$4" nbdinfo "$(uri_unix "$1")" >"$T/out" 2>&1 ||
		fail "uid $2 gid $3 groups '$4' refused $1: $(cat "$T/out")"
	grep -q 'export-size: 1048576' "$T/out" || fail "$1: no size: $(cat "$T/out")"
}
refused() {
	if as "$2" "$3" "$4" nbdinfo "$(uri_unix "$1")" >"$T/out" 2>&1; then
		fail "uid $2 gid $3 groups '$4' was let into $1: $(cat "$T/out")"
	fi
}

log "uid:1000"
admitted by-uid 1000 1000 ""
refused by-uid 1001 1000 ""
refused by-uid 0 0 ""
grep -q 'export "by-uid" refused: uid 1001 gid 1000 matches none of the 1 entries' "$LOG" ||
	fail "no log line naming the refused uid"

log "user:nobody (uid $NOBODY)"
admitted by-user "$NOBODY" "$NOBODY" ""
refused by-user 1000 "$NOBODY" ""

log "group:disk (gid $DISK): the effective gid or a supplementary group"
admitted by-group 1001 "$DISK" ""
admitted by-group 1001 1001 "44,$DISK"
refused by-group 1001 1001 "44"
refused by-group 1001 1001 ""

log "an address entry matches no Unix-socket client"
refused by-address 0 0 ""
nbdinfo "$(uri_tcp by-address)" >"$T/out" 2>&1 ||
	fail "127.0.0.1 refused by-address over TCP: $(cat "$T/out")"
log "a uid entry matches no TCP client, an empty list no one"
if nbdinfo "$(uri_tcp by-uid)" >"$T/out" 2>&1; then
	fail "a TCP client was let into by-uid"
fi
refused no-one 0 0 ""
admitted open 1001 1001 ""

log "LIST shows each client what it may open"
list() {
	as "$1" "$2" "$3" nbdinfo --list --json "nbd+unix:///?socket=$SOCK" |
		jq -r '[.exports[]."export-name"] | join(",")'
}
got=$(list 1000 1000 "") || fail "LIST as uid 1000 failed"
[[ $got == by-uid,open ]] || fail "uid 1000: expected by-uid,open, got '$got'"
got=$(list 1001 1001 "$DISK") || fail "LIST as uid 1001 failed"
[[ $got == by-group,open ]] || fail "uid 1001 in disk: expected by-group,open, got '$got'"
got=$(list "$NOBODY" "$NOBODY" "") || fail "LIST as nobody failed"
[[ $got == by-user,open ]] || fail "nobody: expected by-user,open, got '$got'"
assert_alive
