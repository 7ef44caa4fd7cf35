#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The system user: sysusers.d/wbd.conf makes the wbd user (home
# /var/lib/wbd, no shell), the wbd-admin group with wbd in it, and
# tmpfiles.d/wbd.conf /run/wbd and /var/lib/wbd owned by wbd -- applied to
# a scratch root, so the host is not touched; the unit runs as that user,
# in the groups the shipped wbd.conf names.  And wbd serves as an
# unprivileged user under the unit's UMask=0077 (setpriv), its control
# socket still of the mode the configuration asks for, and with the
# unit's LimitNICE its writeback workers may take back the priority
# writeback.background_nice took.
source "${SRCDIR:?SRCDIR must name tests/service}/lib-service.sh"
: "${UNIT:?UNIT must name the generated wbd.service}"
: "${PKGDIR:?PKGDIR must name packaging/}"
: "${CONFDIR:?CONFDIR must name conf/}"
need systemd-sysusers systemd-tmpfiles setpriv nbdinfo prlimit jq

R=$T/root
mkdir -p "$R/etc" "$R/usr/lib/sysusers.d" "$R/usr/lib/tmpfiles.d"
cp "$PKGDIR/sysusers-wbd.conf" "$R/usr/lib/sysusers.d/wbd.conf"
cp "$PKGDIR/tmpfiles-wbd.conf" "$R/usr/lib/tmpfiles.d/wbd.conf"
systemd-sysusers --root="$R" wbd.conf >"$T/sysusers.log" 2>&1 ||
	fail "systemd-sysusers: $(cat "$T/sysusers.log")"
systemd-tmpfiles --root="$R" --create wbd.conf >"$T/tmpfiles.log" 2>&1 ||
	fail "systemd-tmpfiles: $(cat "$T/tmpfiles.log")"

IFS=: read -r _ _ uid gid _ home shell < <(grep '^wbd:' "$R/etc/passwd") ||
	fail "no wbd user: $(cat "$R/etc/passwd")"
[[ $home == /var/lib/wbd && $shell == */nologin ]] ||
	fail "wbd's home and shell: $home $shell"
grep -q '^wbd-admin:x:[0-9]*:wbd$' "$R/etc/group" ||
	fail "no wbd-admin group with wbd in it: $(cat "$R/etc/group")"
[[ $(stat -c '%u:%g %a' "$R/run/wbd") == "$uid:$gid 755" ]] ||
	fail "/run/wbd: $(stat -c '%u:%g %a' "$R/run/wbd")"
[[ $(stat -c '%u:%g %a' "$R/var/lib/wbd") == "$uid:$gid 750" ]] ||
	fail "/var/lib/wbd: $(stat -c '%u:%g %a' "$R/var/lib/wbd")"

# The unit and the shipped configuration agree with it.
for want in User=wbd Group=wbd SupplementaryGroups=disk UMask=0077 \
	CapabilityBoundingSet= OOMScoreAdjust=-900; do
	grep -qx "$want" "$UNIT" || fail "wbd.service lacks $want"
done
nofile=$(sed -n 's/^LimitNOFILE=//p' "$UNIT")
((nofile > 65536 + 256)) ||
	fail "LimitNOFILE=$nofile does not cover limits.max_connections (at most 65536)"
# LimitNICE: the RLIMIT_NICE the unit gives, so that a writeback worker
# may take back the priority writeback.background_nice took (+N is a
# nice value, 20 - N as a limit; a bare number is the limit itself).
lnice=$(sed -n 's/^LimitNICE=//p' "$UNIT")
case $lnice in
[+-]*) rlnice=$((20 - lnice)) ;;
[0-9]*) rlnice=$lnice ;;
*) fail "wbd.service has no LimitNICE= (writeback.background_nice needs it)" ;;
esac
((rlnice >= 20)) || fail "LimitNICE=$lnice does not let a thread go back to nice 0"
grep -Eq '^ *group = "wbd-admin";' "$CONFDIR/wbd.conf" ||
	fail "the shipped control socket is not of group wbd-admin"
grep -Eq '^ *admin_group = "wbd-admin";' "$CONFDIR/wbd.conf" ||
	fail "the shipped admin_group is not wbd-admin"

# Unprivileged, with the unit's umask: nobody serves from its own
# directory; the control socket keeps mode 0660 for all the umask.
D=$T/nobody
chmod o+x "$T"
mkdir -m 0700 "$D"
chown nobody:nogroup "$D"
add_export disk0 16M rw "" "$D/disk0.img"
write_config "$D/wbd.conf" "$D/nbd.sock"
sed -i "s|^control = .*|control = { socket = \"$D/control.sock\"; mode = \"0660\"; };|" "$D/wbd.conf"
chown nobody:nogroup "$D/wbd.conf"
# Raising the hard RLIMIT_NICE, as systemd does, needs CAP_SYS_RESOURCE:
# where this test lacks it, wbd runs with the limit it has, and must then
# say that it does not apply background_nice.
want_applied=true
lim=(prlimit --nice="$rlnice")
if ! prlimit --nice="$rlnice" true 2>/dev/null; then
	log "cannot raise RLIMIT_NICE to $rlnice here (no CAP_SYS_RESOURCE): wbd must say background_nice is not applied"
	lim=() want_applied=false
fi
(umask 0077 && exec "${lim[@]}" setpriv --reuid=nobody --regid=nogroup \
	--clear-groups "$WBD" -f -c "$D/wbd.conf") >>"$T/nobody.log" 2>&1 &
pid=$!
track_wbd "$pid" "$T/nobody.log"
wait_ready "$pid" "$D/nbd.sock" "$PORT" "$T/nobody.log"
[[ $(stat -c '%U %a' "$D/control.sock") == "nobody 660" ]] ||
	fail "control socket: $(stat -c '%U %a' "$D/control.sock")"
[[ $(stat -c '%U %a' "$D/disk0.img") == "nobody 600" ]] ||
	fail "backing file: $(stat -c '%U %a' "$D/disk0.img")"
nbdinfo "$(uri_unix disk0 "$D/nbd.sock")" >/dev/null || fail "nbdinfo failed"
"$WBCTL" -s "$D/control.sock" status >/dev/null || fail "wbctl status failed"
applied=$("$WBCTL" -s "$D/control.sock" --json status | jq -r .thresholds.background_nice_applied)
[[ $applied == "$want_applied" ]] ||
	fail "writeback.background_nice applied: $applied, expected $want_applied (LimitNICE=$lnice): $(grep -i nice "$T/nobody.log")"
if [[ $want_applied == false ]]; then
	grep -q 'writeback.background_nice = 10 is not applied' "$T/nobody.log" ||
		fail "the log does not say background_nice is not applied"
fi
stop_wbd "$pid"
[[ $EXIT_STATUS == 0 ]] || fail "wbd as nobody exited with status $EXIT_STATUS"
log "user wbd (uid $uid) and wbd-admin made; wbd serves unprivileged under umask 0077"
