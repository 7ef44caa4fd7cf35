#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Every row of the settings table (daemon/base/settings.c) is documented:
# an item of its group in wbd.conf(5) whose "Default:" is the row's
# default (the top level's, a listener's, an export's and its journal's
# rows too); a writeback or cache row named in docs/tuning.md too; a
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

# wbd.conf(5) against the table: each row an item (.TP, then .B KEY or
# .BR KEY1 ", " KEY2) where its group puts it, nested as .RS/.RE nest them:
# the top level's (group "") and each group's under TOP-LEVEL KEYS
# ("listen.tcp" an item of tcp's, inside listen's), an export's under
# EXPORT KEYS ("exports.journal" inside journal's); an item's text runs to
# the next item as deep or shallower, its nested items' text included.
"$SYSPY" - "$T/table" "$MAN" >"$T/wrong" <<'PY' || fail "could not read $MAN"
import re, sys

rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]


def row_path(group, name):
    return tuple(group.split(".")) + (name,) if group else (name,)


paths = {row_path(r[0], r[1]): r for r in rows}
groups = {p[:-1] for p in paths}            # the table's groups, as paths
group_items = {g[:i] for g in groups for i in range(1, len(g) + 1)}
IDENT = re.compile(r"[a-z][a-z0-9_]*$")
items = {}                      # path -> the item's text
lines = open(sys.argv[2]).read().splitlines()
prefix, depth, stack = None, 0, []  # stack[D]: the paths of the item at D
i = 0
while i < len(lines):
    line = lines[i]
    i += 1
    if line.startswith(".SH"):
        title = line[3:].strip().strip('"')
        prefix = {"TOP-LEVEL KEYS": (), "EXPORT KEYS": ("exports",)}.get(title)
        depth, stack = 0, []
        continue
    if prefix is None:
        continue
    if line.startswith(".RS"):
        depth += 1
        continue
    if line.startswith(".RE"):
        depth = max(0, depth - 1)
        del stack[depth + 1:]
        continue
    if line.startswith(".TP") and i < len(lines):
        head = lines[i]
        i += 1
        words = [w.strip('",') for w in head.split()[1:]]
        names = [w for w in words if IDENT.match(w)]
        del stack[depth:]
        while len(stack) < depth:
            stack.append([])    # an .RS with no item of its own
        if depth == 0:
            parent = prefix
        else:
            parent = stack[depth - 1][0] if stack[depth - 1] else None
        here = [parent + (n,) for n in names] if parent is not None else []
        stack.append(here)
        for p in here:
            items.setdefault(p, "")
        continue
    for open_item in stack:
        for p in open_item:
            items[p] += " " + line


def plain(text):
    """The words of roff text: no requests, escapes or quotes."""
    text = re.sub(r"(^| )\.(B|BR|I|IR|RB) ", " ", text)
    text = text.replace(r"\(dq", "").replace(r"\ ", " ").replace('"', "")
    text = text.replace(r"\-", "-")
    return re.sub(r"\s+", " ", text)


for p, (group, name, scope, when, default, unit, doc) in paths.items():
    text = items.get(p)
    if text is None:
        print("%s (a settings table row) is not documented in wbd.conf.5"
              % ".".join(p))
    elif default != "-" and not re.search(
            r"Default: %s\b" % re.escape(default), plain(text)):
        print("%s: the table's default is %s, wbd.conf.5 says %s"
              % (".".join(p), default, re.findall(r"Default: [^.]*",
                                                  plain(text))))
for p in sorted(items):
    if p[:-1] not in groups or p in paths or p in group_items:
        continue            # not a group of the table's; a row; a group
    if p == ("writeback", "devices"):
        continue            # the per-device list: writeback's device rows
    print("wbd.conf.5 documents %s, which the settings table lacks"
          % ".".join(p))
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
