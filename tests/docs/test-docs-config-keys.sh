#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Every key the configuration loader accepts is documented: in wbd.conf(5)
# and in the commented conf/wbd.conf.  The keys are the loader's own: for
# each group, wbd -n is given a key no group has, and its answer "unknown
# key; expected one of: ..." lists the group's keys; each of them that
# takes a group (or a list of groups) is asked the same way, and so on.
# Nothing here lists the keys, so a new one cannot be forgotten.
source "${SRCDIR:?SRCDIR must name tests/ctl}/lib-ctl.sh"
: "${DOCDIR:?DOCDIR must name docs/}"
: "${CONFDIR:?CONFDIR must name conf/}"
MAN=$DOCDIR/wbd.conf.5
SHIPPED=$CONFDIR/wbd.conf
NOKEY=zzzzzzzzzzzzzzzzzzzzzzzz     # far from every key: no "did you mean"

# keys_in WRAP: the keys the loader lists for the group where WRAP (a
# config text with @ for the group's contents) puts an unknown key.
keys_in() {
	local text=${1//@/$NOKEY = 1;} out
	printf '%s\n' "$text" >"$T/probe.conf"
	out=$("$WBD" -n -c "$T/probe.conf" 2>&1 || true)
	sed -n 's/.*unknown key; expected one of: //p' <<<"$out" | tr -d ' ' | tr ',' '\n'
}

# walk PATH WRAP: print PATH.KEY for every key of the group at WRAP, and
# walk each key that takes a group or a list of groups.
walk() {
	local path=$1 wrap=$2 key inner sub
	while read -r key; do
		[[ -n $key ]] || continue
		echo "${path:+$path.}$key"
		for inner in "$key = { @ };" "$key = ( { @ } );"; do
			sub=${wrap//@/$inner}
			if [[ -n $(keys_in "$sub") ]]; then
				walk "${path:+$path.}$key" "$sub"
				break
			fi
		done
	done < <(keys_in "$wrap")
}

walk "" "@" | sort -u >"$T/keys"
(( $(wc -l <"$T/keys") > 20 )) || fail "found only these keys: $(cat "$T/keys")"
grep -qx 'writeback.devices.device' "$T/keys" ||
	fail "the walk did not reach writeback.devices: $(cat "$T/keys")"

# Each key is looked for where its whole path puts it, not by its last
# part (a "mode" or "group" documented in one group is not another's):
#   wbd.conf(5): an item (.TP, then .B KEY or .BR KEY1 ", " KEY2) under
#     the item of each group of its path, nested as .RS/.RE nest them;
#     the keys of an export under EXPORT KEYS.  A key of a list of groups
#     that has no item of its own (writeback.devices) may be named in bold
#     in its group's own text instead.
#   conf/wbd.conf: "KEY =", set or commented out, inside its group's
#     braces (or parentheses), the groups followed through the file;
#     commented-out lines that are configuration ("# key = ...",
#     "#metrics = {", "#};") count as configuration.
"$SYSPY" - "$T/keys" "$MAN" "$SHIPPED" >"$T/missing" <<'PY' || fail "could not read the documentation"
import re, sys

keys = open(sys.argv[1]).read().split()
IDENT = re.compile(r"[a-z_][a-z0-9_]*$")


def man_paths(path):
    """(items, mentions): the paths of wbd.conf(5)'s items, and for each
    item the words set in bold in its own text."""
    items, mentions = set(), {}
    prefix = None           # None outside the sections of keys
    depth = 0               # .RS nesting within the section
    stack = []              # the names of the items open at each depth
    lines = open(path).read().splitlines()
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
        elif line.startswith(".RE"):
            depth = max(0, depth - 1)
            del stack[depth + 1:]
        elif line.startswith(".TP") and i < len(lines):
            head = lines[i]
            i += 1
            words = [w.strip('",') for w in head.split()[1:]]
            names = tuple(w for w in words if IDENT.match(w))
            del stack[depth:]
            stack.append(names)
            for n in names:
                items.add(prefix + tuple(s[0] for s in stack[:-1]) + (n,))
        elif re.match(r"\.(B|BR) ", line) and stack:
            w = line.split()[1].strip('"')
            for n in stack[-1]:
                owner = prefix + tuple(s[0] for s in stack[:-1]) + (n,)
                mentions.setdefault(owner, set()).add(w)
    return items, mentions


def conf_paths(path):
    """The paths of the keys conf/wbd.conf sets or shows commented out."""
    found = set()
    stack = []             # a key name, or None for a list's group
    last = None            # the key whose value comes next
    config_comment = re.compile(r"\s*#\s*([a-z_]+\s*=|[{}()];?\s*$|[})];)")
    for line in open(path):
        if config_comment.match(line):
            line = line.split("#", 1)[1]
        elif line.lstrip().startswith("#"):
            # Prose: "key = ..." there names the key in the group open.
            for k in re.findall(r"(?:^|[ {#(;])([a-z_]+) = ", line):
                found.add(tuple(s for s in stack if s) + (k,))
            continue
        code = re.sub(r'"[^"]*"', '""', line).split("#", 1)[0]
        for tok in re.findall(r"[a-z_][a-z0-9_]*(?=\s*=)|[{}()]", code):
            if tok in "{(":
                stack.append(last)
                last = None
            elif tok in "})":
                if stack:
                    stack.pop()
            else:
                found.add(tuple(s for s in stack if s) + (tok,))
                last = tok
    return found


items, mentions = man_paths(sys.argv[2])
shipped = conf_paths(sys.argv[3])
for key in keys:
    p = tuple(key.split("."))
    if p not in items and not (p[:-1] in items and
                               p[-1] in mentions.get(p[:-1], ())):
        print("%s: not in wbd.conf(5)" % key)
    if p not in shipped:
        print("%s: not in conf/wbd.conf" % key)
PY
mapfile -t missing <"$T/missing"
((${#missing[@]} == 0)) || fail "undocumented keys: $(printf '\n  %s' "${missing[@]}")"
log "$(wc -l <"$T/keys") keys, each in wbd.conf(5) and conf/wbd.conf"
