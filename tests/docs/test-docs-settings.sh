#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Every row of the settings table (daemon/base/settings.c) is documented: a
# key of the writeback group in wbd.conf(5), named in docs/tuning.md, and
# listed by the daemon's own "wbctl tune" when it changes at run time (per
# device for a per-device row) and not otherwise.  And nothing is
# documented, or listed, that the table lacks.
source "${SRCDIR:?SRCDIR must name tests/ctl}/lib-ctl.sh"

: "${SETTINGS_TABLE:?SETTINGS_TABLE must name the settings-table program}"
: "${DOCDIR:?DOCDIR must name docs/}"
MAN=$DOCDIR/wbd.conf.5
TUNING=$DOCDIR/tuning.md

"$SETTINGS_TABLE" >"$T/table" || fail "settings-table failed"
[[ -s $T/table ]] || fail "the settings table is empty"

# The keys wbd.conf(5) documents in the writeback group: the words of each
# .TP item header one .RS level inside "writeback".
awk '
	/^\.B writeback$/ && !inside { armed = 1; next }
	armed && /^A group/ { inside = 1; armed = 0; depth = 0; next }
	{ armed = 0 }
	!inside { next }
	/^\.RS/ { depth++; next }
	/^\.RE/ { if (--depth == 0) exit; next }
	depth == 1 && tp && /^\.BR? / {
		for (i = 2; i <= NF; i++) if ($i ~ /^[a-z][a-z0-9_]*$/) print $i
	}
	{ tp = /^\.TP/ }
' "$MAN" | sort -u >"$T/documented"
[[ -s $T/documented ]] || fail "found no writeback keys in $MAN"

while read -r name scope when unit; do
	grep -qx "$name" "$T/documented" ||
		fail "writeback.$name (a settings table row) is not documented in wbd.conf.5"
	grep -q "\`\(writeback\.\)\?$name\`" "$TUNING" ||
		fail "writeback.$name (a settings table row) is not named in tuning.md"
done <"$T/table"
while read -r key; do
	[[ $key == devices ]] && continue       # the per-device list itself
	[[ $key == io_engine ]] && continue     # a string read at start-up (config.c)
	grep -q "^$key " "$T/table" ||
		fail "wbd.conf.5 documents writeback.$key, which the settings table lacks"
done <"$T/documented"

# The daemon's own listing.
add_export disk0 4M rw
start_wbd
expect_exit 0 wbctl tune
listing=$OUT
dev=$(dev_majmin "$T/disk0.img")
while read -r name scope when unit; do
	case $scope/$when in
	global/runtime) key=$name ;;
	device/runtime) key=device.$dev.$name ;;
	*)
		grep -q "^$name = " <<<"$listing" &&
			fail "wbctl tune lists $name, which needs a restart"
		continue ;;
	esac
	grep -q "^$key = " <<<"$listing" ||
		fail "wbctl tune does not list $key: $listing"
done <"$T/table"
while read -r key; do
	case $key in
	device.*|export.*) key=${key##*.} ;;
	esac
	[[ $key == cache_mode ]] && continue    # an export's, not writeback's
	grep -q "^$key " "$T/table" ||
		fail "wbctl tune lists $key, which the settings table lacks"
done < <(sed -n 's/^\([^ ]*\) = .*/\1/p' <<<"$listing")
log "$(wc -l <"$T/table") settings: documented and listed"
