#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Who may do what.  With control.mode = "0666" an unprivileged user
# (nobody) may read -- status, exports, tune, version -- but tune KEY=VALUE,
# flush and reload are refused: exit status 4, one line saying why, and
# nothing changed.  The refusals are logged with who asked (uid and pid),
# one line in 10 s at most, which counts those left out: every refusal is
# either logged or counted.  A member of control.admin_group may change
# settings.
# With the default mode 0660 the same user cannot connect at all (exit 4).
source "${SRCDIR:-$(dirname "$0")}/lib-ctl.sh"
need setpriv

nobody_uid=65534
admin_group=$(getent group 65534 | cut -d: -f1) || skip "no group 65534"
# nobody without groups; and nobody in the admin group (its primary gid).
as_nobody() {
	setpriv --reuid=$nobody_uid --regid=$nobody_uid --clear-groups "$@"
}
as_nobody true || skip "setpriv cannot switch to uid $nobody_uid"

add_export disk0 16M rw
chmod 755 "$T"
CTL_EXTRA='mode = "0666";'
start_wbd

expect_exit 0 wbctl tune
before=$OUT
for cmd in status exports tune version; do
	expect_exit 0 as_nobody "$WBCTL" -s "$CTL" $cmd
done
refusals_began=$(date +%s%N)
for args in "tune dirty_ratio=30" "flush" "flush disk0" "flush --no-wait" "reload"; do
	expect_exit 4 as_nobody "$WBCTL" -s "$CTL" $args
	assert_one_line "$ERR" "$args as nobody"
	assert_match "uid 0|admin_group" "$ERR" "$args as nobody: the reason"
	assert_match "uid $nobody_uid" "$ERR" "$args as nobody: who"
done
expect_exit 4 as_nobody "$WBCTL" -s "$CTL" --json tune dirty_ratio=30
check_schema error "$T/out"
assert_match '"code": "EPERM"' "$OUT" "--json refusal"
expect_exit 0 wbctl tune
[[ $OUT == "$before" ]] || fail "a refused tune changed the settings"
grep -q "reload requested by uid $nobody_uid" "$LOG" && fail "a refused reload ran"
refusals_ms=$((($(date +%s%N) - refusals_began) / 1000000))
# 6 refusals so far; 10 s on, a 7th is logged again, counting those left
# out since the last line.
sleep 11
expect_exit 4 as_nobody "$WBCTL" -s "$CTL" flush
refused_re="control: refused (tune|flush|reload) to uid $nobody_uid \(pid [0-9]+\): it needs uid 0 or membership of control.admin_group \(([0-9]+) more refused changes not logged\)"
grep -E "$refused_re" "$LOG" >"$T/refused" || fail "no refused change logged"
grep -Eq "control: refused tune to uid $nobody_uid \(pid [0-9]+\)" "$T/refused" ||
	fail "the first refusal (tune) is not the first logged: $(cat "$T/refused")"
lines=0 counted=0
while read -r n; do
	lines=$((lines + 1)) counted=$((counted + n))
done < <(sed -E "s/.*\(([0-9]+) more refused changes not logged\)\$/\1/" "$T/refused")
((lines + counted == 7)) ||
	fail "7 refusals, $lines logged and $counted counted as left out: $(cat "$T/refused")"
# The first 6 within 10 s: the first of them logged, and the 7th.
((refusals_ms >= 10000 || lines == 2)) ||
	fail "6 refusals in $refusals_ms ms and the 7th after 11 s: $lines lines, expected 2: $(cat "$T/refused")"

# The admin group may change things.
stop_wbd
CTL_EXTRA="mode = \"0666\"; admin_group = \"$admin_group\";"
write_config
start_wbd
expect_exit 0 as_nobody "$WBCTL" -s "$CTL" tune dirty_ratio=30
[[ $(tunable dirty_ratio) == 30 ]] || fail "the admin group's tune did not apply"
expect_exit 0 as_nobody "$WBCTL" -s "$CTL" flush
expect_exit 0 as_nobody "$WBCTL" -s "$CTL" reload
# Root needs no group.
expect_exit 0 wbctl tune dirty_ratio=25

# Mode 0660 (the default), owned by root: nobody cannot even connect.
stop_wbd
CTL_EXTRA=
write_config
start_wbd
[[ $(stat -c %a "$CTL") == 660 ]] || fail "control socket mode is $(stat -c %a "$CTL"), expected 660"
expect_exit 4 as_nobody "$WBCTL" -s "$CTL" status
assert_one_line "$ERR" "status as nobody on a 0660 socket"
assert_match "permission denied" "$ERR" "status as nobody on a 0660 socket"
expect_exit 0 wbctl status
assert_alive
