#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# wbctl reload (and SIGHUP) rereads the config: new thresholds apply at
# once, a new export appears.  A config with an error
# is rejected whole -- wbctl says why on one line, exit status 5 -- and the
# running settings stay.
source "${SRCDIR:-$(dirname "$0")}/lib-ctl.sh"

add_export disk0 16M rw
write_cache_config 64M 'dirty_expire_centisecs = 3000;'
start_wbd
conf0=$(cat "$CONF")

# A good config: a threshold changed and a new export.
sed -i 's|dirty_expire_centisecs = 3000;|dirty_expire_centisecs = 700;|' "$CONF"
sed -i "s|^exports = (|exports = (\n  { name = \"disk9\"; backing = \"$T/disk9.img\"; size = \"4M\"; readonly = false; },|" "$CONF"
"$WBD" -n -c "$CONF" >/dev/null || fail "the test's new config is bad: $(cat "$CONF")"
expect_exit 0 wbctl reload
log "reload: $OUT"
assert_match 'disk9' "$OUT" "reload message names the new export"
[[ $(tunable dirty_expire_centisecs) == 700 ]] || fail "reload did not apply dirty_expire_centisecs"
expect_exit 0 wbctl exports
assert_match '^disk9 +4\.0 MiB ' "$OUT" "exports after reload"
nbdinfo "$(uri_unix disk9)" >/dev/null || fail "the new export does not serve"

# A broken config: rejected whole, nothing changes.
good=$(cat "$CONF")
expect_exit 0 wbctl tune
before=$OUT
sed -i 's|dirty_expire_centisecs = 700;|dirty_expire_centisecs = 900; dirty_ratio = 250;|' "$CONF"
expect_exit 5 wbctl reload
assert_one_line "$ERR" "reload of a broken config"
assert_match 'dirty_ratio' "$ERR" "reload of a broken config names the key"
log "broken reload: $ERR"
expect_exit 5 wbctl --json reload
check_schema error "$T/out"
assert_match '"code": "EINVAL"' "$OUT" "--json reload of a broken config"
expect_exit 0 wbctl tune
[[ $OUT == "$before" ]] || fail "a rejected reload changed settings"
echo "syntax error {" >>"$CONF"
expect_exit 5 wbctl reload
assert_one_line "$ERR" "reload of an unparsable config"

# SIGHUP does the same as wbctl reload.
echo "$conf0" >"$CONF"
sed -i 's|dirty_expire_centisecs = 3000;|dirty_expire_centisecs = 1100;|' "$CONF"
kill -HUP "$WBD_PID"
for ((i = 0; i < 50; i++)); do
	[[ $(tunable dirty_expire_centisecs) == 1100 ]] && break
	sleep 0.1
done
[[ $(tunable dirty_expire_centisecs) == 1100 ]] || fail "SIGHUP did not apply the new config"
echo "syntax error {" >>"$CONF"
kill -HUP "$WBD_PID"
sleep 0.5
assert_alive
[[ $(tunable dirty_expire_centisecs) == 1100 ]] || fail "a broken config on SIGHUP changed settings"
nbdinfo "$(uri_unix disk0)" >/dev/null || fail "disk0 no longer serves"
