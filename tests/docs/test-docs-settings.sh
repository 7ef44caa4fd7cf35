#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Every row of the settings table (daemon/base/settings.c) is documented:
# an item of its group in wbd.conf(5) whose "Default:" is the row's
# default; a writeback or cache row named in docs/tuning.md too; a
# writeback row listed by the daemon's own "wbctl tune", with its doc line,
# when it changes at run time (per device for a per-device row) and not
# otherwise.  And nothing is documented in those groups, or listed, that
# the table lacks.
source "${SRCDIR:?SRCDIR must name tests/ctl}/lib-ctl.sh"

: "${SETTINGS_TABLE:?SETTINGS_TABLE must name the settings-table program}"
: "${DOCDIR:?DOCDIR must name docs/}"
MAN=$DOCDIR/wbd.conf.5
TUNING=$DOCDIR/tuning.md

"$SETTINGS_TABLE" >"$T/table" || fail "settings-table failed"
[[ -s $T/table ]] || fail "the settings table is empty"

# wbd.conf(5) against the table: each group's items (a .TP item header one
# .RS level inside ".B GROUP" then "A group"), each item's text.
"$SYSPY" - "$T/table" "$MAN" >"$T/wrong" <<'PY' || fail "could not read $MAN"
import re, sys

rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
groups = {r[0] for r in rows}
lines = open(sys.argv[2]).read().splitlines()
items = {}                      # (group, key) -> the item's text
i = 0
while i < len(lines):
    m = re.match(r"\.B ([a-z]+)$", lines[i])
    i += 1
    if not m or m.group(1) not in groups or i >= len(lines) or \
            not lines[i].startswith("A group"):
        continue
    group, depth, keys = m.group(1), 0, None
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith(".RS"):
            depth += 1
        elif line.startswith(".RE"):
            depth -= 1
            if depth == 0:
                break
        elif depth == 1 and line.startswith(".TP") and i < len(lines):
            words = [w.strip('",') for w in lines[i].split()[1:]]
            keys = [w for w in words if re.match(r"[a-z][a-z0-9_]*$", w)]
            i += 1
            for k in keys:
                items.setdefault((group, k), "")
            continue
        if depth >= 1 and keys:
            for k in keys:
                items[(group, k)] += " " + line


def plain(text):
    """The words of roff text: no requests, escapes or quotes."""
    text = re.sub(r"(^| )\.(B|BR|I|IR|RB) ", " ", text)
    text = text.replace(r"\(dq", "").replace(r"\ ", " ").replace('"', "")
    return re.sub(r"\s+", " ", text)


for group, name, scope, when, default, unit, doc in rows:
    text = items.get((group, name))
    if text is None:
        print("%s.%s (a settings table row) is not documented in wbd.conf.5"
              % (group, name))
    elif default != "-" and not re.search(
            r"Default: %s\b" % re.escape(default), plain(text)):
        print("%s.%s: the table's default is %s, wbd.conf.5 says %s"
              % (group, name, default, re.findall(r"Default: [^.]*",
                                                  plain(text))))
for group, key in sorted(items):
    if (group, key) in (("writeback", "devices"), ("writeback", "io_engine")):
        continue            # the per-device list; a string read by config.c
    if not any(r[0] == group and r[1] == key for r in rows):
        print("wbd.conf.5 documents %s.%s, which the settings table lacks"
              % (group, key))
PY
mapfile -t wrong <"$T/wrong"
((${#wrong[@]} == 0)) || fail "wbd.conf.5 and the table disagree: $(printf '\n  %s' "${wrong[@]}")"

while IFS=$'\t' read -r group name scope when default unit doc; do
	[[ $group == writeback || $group == cache ]] || continue
	grep -q "\`\($group\.\)\?$name\`" "$TUNING" ||
		fail "$group.$name (a settings table row) is not named in tuning.md"
done <"$T/table"

# The daemon's own listing, with each row's doc line.
add_export disk0 4M rw
start_wbd
expect_exit 0 wbctl tune
listing=$OUT
expect_exit 0 wbctl --json tune
json=$OUT
dev=$(dev_majmin "$T/disk0.img")
while IFS=$'\t' read -r group name scope when default unit doc; do
	[[ $group == writeback ]] || continue
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
	grep -qF "\"$doc\"" <<<"$json" ||
		fail "wbctl tune does not describe $key as \"$doc\": $json"
done <"$T/table"
while read -r key; do
	case $key in
	device.*|export.*) key=${key##*.} ;;
	esac
	[[ $key == cache_mode ]] && continue    # an export's, not writeback's
	grep -q "^writeback	$key	" "$T/table" ||
		fail "wbctl tune lists $key, which the settings table lacks"
done < <(sed -n 's/^\([^ ]*\) = .*/\1/p' <<<"$listing")
log "$(wc -l <"$T/table") settings: documented and listed"
