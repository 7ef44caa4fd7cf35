#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Every wbctl command against a live daemon, in its human form and with
# --json (the answer checked against the protocol's schema): status,
# exports, tune (listing and setting), flush, reload, metrics, version; and the
# --help of each, both as "wbctl help CMD" and "wbctl CMD --help".
source "${SRCDIR:-$(dirname "$0")}/lib-ctl.sh"

add_export disk0 16M rw "first disk"
add_export disk1 8M ro
start_wbd
dev=$(dev_majmin "$T/disk0.img")

# version
expect_exit 0 wbctl version
assert_match '^wbctl [0-9]' "$(sed -n 1p <<<"$OUT")" "version line 1"
assert_match '^wbd [0-9]' "$(sed -n 2p <<<"$OUT")" "version line 2"
assert_match '^control protocol 1$' "$(sed -n 3p <<<"$OUT")" "version line 3"
expect_exit 0 wbctl --json version
check_schema version "$T/out"

# status
expect_exit 0 wbctl status
assert_match "^wbd .*, pid $WBD_PID, up " "$OUT" "status: daemon line"
assert_match '^cache 64\.0 MiB in 4096-byte pages' "$OUT" "status: cache line"
assert_match '^  dirty_background +10% of the cache = 6\.4 MiB$' "$OUT" "status: threshold"
assert_match '^  dirty +20% of the cache = 12\.8 MiB$' "$OUT" "status: threshold"
assert_match '^  NAME +SIZE +CACHE MODE +CACHED +DIRTY +OLDEST DIRTY +CONNS +ERRORS +DEVICE$' "$OUT" "status: export heading"
assert_match "^  disk0 +16\.0 MiB +writeback +.* $dev\$" "$OUT" "status: disk0"
assert_match "^  disk1 +8\.0 MiB +writeback \(ro\) .* $dev\$" "$OUT" "status: disk1"
assert_match '^  DEVICE +DIRTY +WRITEBACK +WRITTEN +BANDWIDTH +WORKERS +QUEUED +ERRORS +BACKOFF$' "$OUT" "status: device heading"
assert_match "^  $dev +0 B +0 B +0 B +0 B/s +0/1 \(1\.\.8\) +0 +0 +-\$" "$OUT" "status: device"
assert_match "^  $dev: exports disk0, disk1; ratio 0\.\.100% of the dirty limit\$" "$OUT" "status: device's exports"
expect_exit 0 wbctl --json status
check_schema status "$T/out"
# The JSON answer says what the human view showed.
"$SYSPY" - "$T/out" "$WBD_PID" "$dev" <<'PY' || fail "status --json: see above"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["pid"] == int(sys.argv[2]), s["pid"]
assert [e["name"] for e in s["exports"]] == ["disk0", "disk1"], s["exports"]
assert s["exports"][0]["size_bytes"] == 16 << 20
assert s["exports"][1]["readonly"] is True
assert s["devices"][0]["device"] == sys.argv[3]
assert s["devices"][0]["exports"] == ["disk0", "disk1"]
assert s["thresholds"]["dirty_background_ratio"] == 10
assert abs(s["thresholds"]["dirty_background_bytes"] - (64 << 20) // 10) < 4096, s["thresholds"]
PY
# --json after the command name works too.
expect_exit 0 wbctl status --json
check_schema status "$T/out"

# exports
expect_exit 0 wbctl exports
assert_match '^NAME +SIZE +CACHE MODE +ACCESS +DEVICE +DESCRIPTION$' "$OUT" "exports heading"
assert_match "^disk0 +16\.0 MiB +writeback +rw +$dev +first disk\$" "$OUT" "exports: disk0"
assert_match "^disk1 +8\.0 MiB +writeback +ro +$dev\$" "$OUT" "exports: disk1"
expect_exit 0 wbctl --json exports
check_schema exports "$T/out"

# tune: every tunable, "key = value unit"
expect_exit 0 wbctl tune
for k in dirty_background_ratio dirty_background_bytes dirty_ratio \
	 dirty_bytes dirty_expire_centisecs dirty_writeback_centisecs \
	 min_workers max_workers worker_spawn_ms worker_idle_ms \
	 "device.$dev.min_ratio" "device.$dev.max_ratio" \
	 export.disk0.cache_mode export.disk1.cache_mode; do
	assert_match "^$k = [^ ]+( [^ ]+)?\$" "$OUT" "tune lists $k"
done
assert_match '^dirty_ratio = 20 %$' "$OUT" "tune: dirty_ratio"
assert_match '^dirty_expire_centisecs = 3000 centisecs$' "$OUT" "tune: expire"
expect_exit 0 wbctl --json tune
check_schema tune "$T/out"
expect_exit 0 wbctl tune dirty_ratio
[[ $OUT == "dirty_ratio = 20 %" ]] || fail "tune KEY printed: $OUT"

# tune KEY=VALUE prints what changed, with the new values.
expect_exit 0 wbctl tune dirty_expire_centisecs=1500 dirty_bytes=16M
assert_match '^dirty_expire_centisecs = 1500 centisecs$' "$OUT" "tune set: expire"
assert_match '^dirty_bytes = 16777216' "$OUT" "tune set: dirty_bytes"
[[ $(tunable dirty_ratio) == 0 || $(tunable dirty_ratio) == - ]] ||
	fail "setting dirty_bytes did not clear dirty_ratio: $(tunable dirty_ratio)"
expect_exit 0 wbctl --json tune dirty_expire_centisecs=2000
check_schema tune-set "$T/out"
[[ $(tunable dirty_expire_centisecs) == 2000 ]] || fail "tune --json did not set"
expect_exit 0 wbctl tune export.disk0.cache_mode=writethrough
[[ $(tunable export.disk0.cache_mode) == writethrough ]] || fail "cache_mode not set"
expect_exit 0 wbctl exports
assert_match "^disk0 +16\.0 MiB +writethrough " "$OUT" "exports after tuning cache_mode"

# flush
expect_exit 0 wbctl flush
[[ $OUT == "flushed disk0, disk1" ]] || fail "flush printed: $OUT"
expect_exit 0 wbctl flush disk1
[[ $OUT == "flushed disk1" ]] || fail "flush disk1 printed: $OUT"
expect_exit 0 wbctl flush --all
expect_exit 0 wbctl --json flush disk0
check_schema flush "$T/out"
expect_exit 0 wbctl flush --no-wait disk0
[[ $OUT == "writeback queued for disk0" ]] || fail "flush --no-wait printed: $OUT"
expect_exit 1 wbctl flush nosuchexport
assert_one_line "$ERR" "flush of an unknown export"
assert_match 'nosuchexport' "$ERR" "flush of an unknown export"
expect_exit 1 wbctl --json flush nosuchexport
check_schema error "$T/out"
assert_match '"code": "ENOENT"' "$OUT" "flush --json of an unknown export"

# reload
expect_exit 0 wbctl reload
[[ -n $OUT ]] || fail "reload printed nothing"
expect_exit 0 wbctl --json reload
check_schema reload "$T/out"

# metrics (tests/metrics has the rest)
expect_exit 0 wbctl metrics
assert_match '^wbd_export_requests_total\{export="disk0",command="write"\} [0-9]+$' "$OUT" "metrics: disk0's writes"
expect_exit 0 wbctl --json metrics
check_schema metrics "$T/out"

# help, two ways, for every command
for c in status exports tune flush reload metrics version; do
	expect_exit 0 "$WBCTL" help "$c"
	assert_match "^Usage: wbctl \[OPTION\]\.\.\. $c" "$OUT" "help $c"
	a=$OUT
	expect_exit 0 "$WBCTL" "$c" --help
	[[ $OUT == "$a" ]] || fail "\"wbctl $c --help\" differs from \"wbctl help $c\""
	expect_exit 0 "$WBCTL" --help
	assert_match "^  $c" "$OUT" "wbctl --help lists $c"
done
assert_alive
