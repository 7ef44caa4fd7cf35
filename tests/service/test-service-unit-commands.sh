#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The commands of the wbd.service this build generates, run as systemd
# would run them (paths of the build and the test substituted): Type=notify
# with ExecStart sends READY=1; ExecStartPre passes a good file and stops
# a bad one; ExecReload waits for the reload, succeeds when the new file
# is applied and fails (status 5, the error on stderr) when it is rejected
# -- where "kill -HUP" reported success either way -- while wbd goes on
# serving with its running settings.
source "${SRCDIR:?SRCDIR must name tests/service}/lib-service.sh"
: "${UNIT:?UNIT must name the generated wbd.service}"
need nbdinfo

# unit_cmd KEY: the unit's KEY= command line, for this test's files.
unit_cmd() {
	local line
	line=$(sed -n "s/^$1=//p" "$UNIT")
	[[ -n $line ]] || fail "$UNIT has no $1="
	sed -e "s|^[^ ]*/wbd |$WBD |" -e "s|^[^ ]*/wbctl |$WBCTL |" \
		-e "s| [^ ]*/wbd/wbd\.conf| $CONF|g" \
		-e "s|/run/wbd/control\.sock|$CTL|g" <<<"$line"
}

grep -qx 'Type=notify' "$UNIT" || fail "wbd.service is not Type=notify"
grep -q '^ExecReload=.*kill' "$UNIT" && fail "ExecReload still sends a signal"

add_export disk0 16M rw
write_config
read -ra pre <<<"$(unit_cmd ExecStartPre)"
read -ra start <<<"$(unit_cmd ExecStart)"
read -ra reload <<<"$(unit_cmd ExecReload)"
log "ExecStartPre: ${pre[*]}"
log "ExecStart:    ${start[*]}"
log "ExecReload:   ${reload[*]}"

expect_exit 0 "${pre[@]}"
cp "$CONF" "$T/good.conf"
echo 'bogus = 1;' >>"$CONF"
expect_exit 1 "${pre[@]}"
cp "$T/good.conf" "$CONF"

start_notify_listener
_LOGS+=("$LOG")
NOTIFY_SOCKET=$NOTIFY "${start[@]}" >>"$LOG" 2>&1 &
WBD_PID=$!
track_wbd "$WBD_PID"
wait_note '^READY=1$' 30
can_connect "$SOCK" "$PORT" || fail "READY=1 came before wbd accepted connections"

# A good change: applied, and ExecReload says so.
sed -i 's|^exports = (|exports = (\n  { name = "disk1"; backing = "'"$T"'/disk1.img"; size = "8M"; },|' "$CONF"
expect_exit 0 "${reload[@]}"
assert_match 'disk1' "$OUT" "ExecReload's report of the added export"
nbdinfo "$(uri_unix disk1)" >/dev/null || fail "disk1 is not served after the reload"

# A rejected file: ExecReload fails with the error; wbd serves on.
echo 'writeback = { dirty_ratio = 500; };' >>"$CONF"
expect_exit 5 "${reload[@]}"
assert_match 'dirty_ratio' "$ERR" "ExecReload's error"
assert_alive
nbdinfo "$(uri_unix disk1)" >/dev/null || fail "wbd stopped serving after a rejected reload"
wait_note '^READY=1$' 10 "$NOTE_LINE"
log "ExecReload: 0 when applied, 5 with the error when rejected"
