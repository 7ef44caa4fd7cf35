#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# user = "nobody"; group = "nogroup": started as root, wbd opens its
# sockets and every backing (one only root may open, too), then runs as
# nobody in every thread with no capability left, an empty capability
# bounding set and no_new_privs; it serves, writes back
# and flushes; a reload adding an export whose backing nobody may not open
# says so plainly (path, user, permission denied) and one it may open is
# added; it exits cleanly.  Started as another user, it refuses to start.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need nbdcopy setpriv
[[ $(id -u) == 0 ]] || skip "needs root to drop privileges"
getent passwd nobody >/dev/null || skip "no user 'nobody'"
getent group nogroup >/dev/null || skip "no group 'nogroup'"
NOBODY=$(id -u nobody)
NOGROUP=$(getent group nogroup | cut -d: -f3)
WBCTL=${WBCTL:?meson sets WBCTL}

chmod 0711 "$T"
# Backings: one nobody owns, one only root may open (opened before the
# drop, so served all the same).
truncate -s 8M "$T/d.img" "$T/rootonly.img"
chown nobody:nogroup "$T/d.img"
chmod 0600 "$T/d.img" "$T/rootonly.img"
add_export d 8M rw "" "$T/d.img"
add_export rootonly 8M rw "" "$T/rootonly.img"
CONF_EXTRA='user = "nobody"; group = "nogroup";'
start_wbd
grep -q "now running as user nobody (uid $NOBODY), group nogroup (gid $NOGROUP)" "$LOG" ||
	fail "the log does not say wbd now runs as nobody"

log "every thread runs as nobody, with no capability"
checked=0
for st in /proc/"$WBD_PID"/task/*/status; do
	# Read once; a thread that has ended since the glob (the cache's
	# prefault threads finish about when wbd is ready) is skipped.
	status=$(cat "$st" 2>/dev/null) || continue
	uids=$(awk '/^Uid:/ { print $2, $3, $4, $5 }' <<<"$status")
	gids=$(awk '/^Gid:/ { print $2, $3, $4, $5 }' <<<"$status")
	[[ $uids == "$NOBODY $NOBODY $NOBODY $NOBODY" ]] || fail "$st: Uid $uids"
	[[ $gids == "$NOGROUP $NOGROUP $NOGROUP $NOGROUP" ]] || fail "$st: Gid $gids"
	for cap in CapEff CapPrm CapAmb CapBnd; do
		v=$(awk -v k="$cap:" '$1 == k { print $2 }' <<<"$status")
		[[ $v == 0000000000000000 ]] || fail "$st: $cap is $v"
	done
	nnp=$(awk '$1 == "NoNewPrivs:" { print $2 }' <<<"$status")
	[[ $nnp == 1 ]] || fail "$st: NoNewPrivs is '$nnp', expected 1"
	checked=$((checked + 1))
done
((checked >= 3)) || fail "only $checked threads could be read"
groups=$(awk '/^Groups:/ { $1 = ""; print }' /proc/"$WBD_PID"/status | xargs)
[[ $groups == "$NOGROUP" ]] || fail "supplementary groups: '$groups', expected nobody's ($NOGROUP)"
"$WBCTL" -s "$T/control.sock" --json status |
	jq -e --argjson u "$(id -u nobody)" '.run_as.uid == $u and .run_as.user == "nobody"' >/dev/null ||
	fail "wbctl status does not show wbd running as nobody"
"$WBCTL" -s "$T/control.sock" status | grep -q "running as *uid $(id -u nobody), gid .* (user nobody" ||
	fail "wbctl status (text) does not say who wbd runs as"

log "serving, writeback and flush still work"
head -c 8M /dev/urandom >"$T/src.bin"
for e in d rootonly; do
	nbdcopy --flush "$T/src.bin" "$(uri_unix "$e")" ||
		fail "nbdcopy into $e failed"
	cmp "$T/src.bin" "$T/$e.img" || fail "$e: the backing does not hold the data after FLUSH"
	nbdcopy "$(uri_unix "$e")" "$T/back.bin" || fail "nbdcopy out of $e failed"
	cmp "$T/src.bin" "$T/back.bin" || fail "$e: read back other data"
done

log "reload: an export nobody may not open is refused plainly"
truncate -s 1M "$T/secret.img"
chmod 0600 "$T/secret.img"
add_export secret 1M rw "" "$T/secret.img"
truncate -s 1M "$T/later.img"
chown nobody:nogroup "$T/later.img"
add_export later 1M rw "" "$T/later.img"
write_config
out=$("$WBCTL" -s "$T/control.sock" reload 2>&1) || true
log "wbctl reload: $out"
grep -q "export \"secret\" could not be added: permission denied opening \"$T/secret.img\" as user nobody" <<<"$out" ||
	fail "wbctl reload does not say why secret could not be added: $out"
grep -q "$T/secret.img: cannot open backing file: Permission denied" "$LOG" ||
	fail "the log does not name the path and the error"
grep -q 'export "later" added' <<<"$out" || fail "later was not added: $out"
head -c 1M "$T/src.bin" >"$T/src1.bin"
nbdcopy --flush "$T/src1.bin" "$(uri_unix later)" || fail "nbdcopy into later failed"
cmp "$T/src1.bin" "$T/later.img" || fail "later: the data is not on the backing"

stop_wbd
[[ $EXIT_STATUS == 0 ]] || fail "wbd exited $EXIT_STATUS after SIGTERM"
grep -q 'shutdown complete: all dirty data written back' "$LOG" ||
	fail "no clean shutdown"

log "started as another user than root, it refuses to start"
U=$T/u1000
mkdir "$U"
chown 1000:1000 "$U"
truncate -s 1M "$U/u.img"
chown 1000:1000 "$U/u.img"
cat >"$U/wbd.conf" <<EOF
listen = { unix = [ "$U/nbd.sock" ]; };
control = { socket = "none"; };
user = "nobody";
exports = ( { name = "u"; backing = "$U/u.img"; } );
EOF
chmod 0644 "$U/wbd.conf"
rc=0
setpriv --reuid=1000 --regid=1000 --clear-groups "$WBD" -f -c "$U/wbd.conf" \
	>"$T/u1000.log" 2>&1 || rc=$?
_LOGS+=("$T/u1000.log")
[[ $rc == 1 ]] || fail "wbd as uid 1000 with user = nobody exited $rc: $(cat "$T/u1000.log")"
grep -q 'user = "nobody": wbd runs as uid 1000, not root, and cannot change' "$T/u1000.log" ||
	fail "no reason given: $(cat "$T/u1000.log")"
[[ ! -e $U/nbd.sock ]] || fail "the socket was left behind"
