#!/usr/bin/env bash
# check-format.sh - every line of C changed since .clang-format was added
# is formatted as .clang-format says (git clang-format --diff against the
# commit that added it; uncommitted changes count too).
#
# Usage: check-format.sh TOP          check the tree at TOP (a git checkout)
#        check-format.sh --self-test  a badly formatted new line is caught,
#                                     a well formatted one is not
# Exit 0 if clean, 1 (with the diff that would fix it) if not.
set -uo pipefail

gcf=$(command -v git-clang-format || command -v git-clang-format-14 || true)
if [[ -z $gcf ]]; then
	echo "check-format: git-clang-format not found (Debian: clang-format;" \
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
	out=$(cd "$top" && "$gcf" --diff --extensions c,h "$base" -- . 2>&1)
	case $out in
	"" | *"no modified files to format"* | \
	    *"clang-format did not modify any files"*)
		echo "check-format: every C line changed since ${base:0:12}" \
		    "is formatted"
		return 0 ;;
	esac
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
	((failures == 0)) && echo "self-test: ok"
	return $((failures > 0))
}

if [[ ${1:-} == --self-test ]]; then
	self_test
	exit
fi
check "${1:?usage: check-format.sh TOP | --self-test}"
