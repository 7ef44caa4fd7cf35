#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# check-format.sh - every line of C changed since .clang-format was added
# is formatted as .clang-format says: the diff against the commit that
# added it (uncommitted changes count too), read by clang-format-diff.
# The diff follows renames, so a file moved to another folder is checked
# on the lines changed in it, not as a new file.
#
# Usage: check-format.sh TOP          check the tree at TOP (a git checkout)
#        check-format.sh --self-test  a badly formatted new line is caught,
#                                     a well formatted one is not, a moved
#                                     file's old lines are not new
# Exit 0 if clean, 1 (with the diff that would fix it) if not.
set -uo pipefail

cfd=$(command -v clang-format-diff || command -v clang-format-diff-14 || true)
if [[ -z $cfd ]]; then
	echo "check-format: clang-format-diff not found (Debian: clang-format;" \
	    "scripts/install-deps.sh installs it)" >&2
	exit 1
fi

# check TOP: 0 clean, 1 not.
check() {
	local top=$1 base out
	base=$(git -C "$top" log --diff-filter=A --format=%H -- .clang-format |
	    tail -n 1)
	if [[ -z $base ]]; then
		echo "check-format: no commit adds .clang-format in $top" \
		    "(a shallow clone?)" >&2
		return 1
	fi
	# git-clang-format diffs without rename detection (every line of a
	# moved file would count as changed): the diff is made here instead.
	# -M20%: a file that changed much since that commit is still paired
	# with its old self when it moves (daemon/config.h had grown from 110
	# lines to 223 when it became daemon/base/config.h; git's default of
	# 50% took it for a new file, all its lines changed).  -C20%: a file
	# split in two keeps its old lines in both (the same config.h: its
	# structs in base/config.h, its prototypes in conf/config-load.h).
	out=$(cd "$top" &&
	    git diff -M20% -C20% --no-color --no-ext-diff -U0 --diff-filter=d \
		"$base" \
		-- '*.c' '*.h' | "$cfd" -p1 2>&1)
	if [[ -z $out ]]; then
		echo "check-format: every C line changed since ${base:0:12}" \
		    "is formatted"
		return 0
	fi
	echo "check-format: lines changed since ${base:0:12} are not" \
	    "formatted as .clang-format says; the fix:"
	echo "$out"
	return 1
}

self_test() {
	local d failures=0
	d=$(mktemp -d "${TMPDIR:-/tmp}/check-format.XXXXXX")
	trap 'rm -rf "$d"' RETURN
	git -C "$d" init -q
	git -C "$d" config user.email t@t
	git -C "$d" config user.name t
	cp "$(dirname "${BASH_SOURCE[0]}")/../../.clang-format" "$d/"
	printf 'int\nf(void)\n{\n\treturn 0;\n}\n' >"$d/a.c"
	git -C "$d" add -A && git -C "$d" commit -qm base
	printf 'int\ng(void)\n{\n\treturn 1;\n}\n' >>"$d/a.c"
	check "$d" >/dev/null || { echo "self-test: a clean line refused"; failures=$((failures + 1)); }
	printf 'int h(void) {   return 2; }\n' >>"$d/a.c"
	check "$d" >/dev/null && { echo "self-test: a bad line passed"; failures=$((failures + 1)); }
	git -C "$d" commit -qam bad
	check "$d" >/dev/null && { echo "self-test: a committed bad line passed"; failures=$((failures + 1)); }
	# A file that was there, badly formatted, before .clang-format came:
	# moved, its old lines are not changed lines; a new bad line is.
	rm -rf "$d" && mkdir "$d"
	git -C "$d" init -q
	git -C "$d" config user.email t@t
	git -C "$d" config user.name t
	printf 'int old(void) {   return 0; }\n' >"$d/old.c"
	for i in $(seq 1 20); do printf 'int\nf%d(void)\n{\n\treturn %d;\n}\n' "$i" "$i" >>"$d/old.c"; done
	git -C "$d" add -A && git -C "$d" commit -qm old
	cp "$(dirname "${BASH_SOURCE[0]}")/../../.clang-format" "$d/"
	git -C "$d" add -A && git -C "$d" commit -qm format
	mkdir "$d/sub" && git -C "$d" mv old.c sub/old.c
	check "$d" >/dev/null || { echo "self-test: a moved file's old lines counted as changed"; failures=$((failures + 1)); }
	printf 'int h(void) {   return 2; }\n' >>"$d/sub/old.c"
	check "$d" >/dev/null && { echo "self-test: a bad line in a moved file passed"; failures=$((failures + 1)); }
	((failures == 0)) && echo "self-test: ok"
	return $((failures > 0))
}

if [[ ${1:-} == --self-test ]]; then
	self_test
	exit
fi
check "${1:?usage: check-format.sh TOP | --self-test}"
