#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# wbctl tune refuses an unknown key, a bad unit, a value out of range, a
# malformed KEY=VALUE: one line on stderr, the documented exit status, and
# the daemon's settings unchanged -- also when the bad pair comes with good
# ones (all or nothing).
source "${SRCDIR:-$(dirname "$0")}/lib-ctl.sh"

add_export disk0 16M rw
start_wbd
dev=$(dev_majmin "$T/disk0.img")

expect_exit 0 wbctl tune
before=$OUT

# bad KEY=VALUE  exit  what the message must name
cases=(
	"no_such_key=5                      5 no_such_key"
	"dirty_background_bytes=12Q         5 dirty_background_bytes"
	"dirty_background_bytes=lots         5 dirty_background_bytes"
	"dirty_ratio=101                    5 dirty_ratio"
	"dirty_ratio=-3                     5 dirty_ratio"
	"min_workers=0                      5 min_workers"
	"max_workers=65                     5 max_workers"
	"device.$dev.max_ratio=200          5 max_ratio"
	"device.999:999.min_ratio=1         5 999:999"
	"export.nosuch.cache_mode=writeback 5 nosuch"
	"export.disk0.cache_mode=sometimes  5 cache_mode"
	"=5                                 2 =5"
	"dirty_ratio=                       2 dirty_ratio"
)
for c in "${cases[@]}"; do
	read -r arg want word <<<"$c"
	expect_exit "$want" wbctl tune "$arg"
	assert_one_line "$(grep -v '^Usage:\|^Try ' <<<"$ERR")" "tune $arg"
	grep -qF -- "$word" <<<"$ERR" || fail "tune $arg: the error does not name $word: $ERR"
	log "tune $arg: exit $want: $(head -n1 <<<"$ERR")"
done

# All or nothing: a good pair with a bad one changes nothing.
expect_exit 5 wbctl tune dirty_expire_centisecs=100 dirty_ratio=500
# A threshold below its companion is refused too.
expect_exit 5 wbctl tune dirty_background_ratio=50 dirty_ratio=40

expect_exit 0 wbctl tune
[[ $OUT == "$before" ]] || fail "a refused tune changed the settings:
--- before ---
$before
--- after ---
$OUT"

# Showing an unknown key is an invalid key too; mixing shows and sets is a
# usage error.
expect_exit 5 wbctl tune no_such_key
expect_exit 2 wbctl tune dirty_ratio dirty_bytes=1M
assert_alive
