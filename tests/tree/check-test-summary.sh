#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# check-test-summary.sh TOP - scripts/test.sh's closing lines
# (scripts/lib-test-summary.sh), from meson test logs made here: a run
# with failures ends with "N passed, N failed[, N skipped]" then
# "failed: " naming each failed test as STAGE:NAME (FAIL, TIMEOUT and
# ERROR; not OK, SKIP or EXPECTEDFAIL), and returns non-zero; a clean run
# ends with the counts line and returns 0.  Exit 0 if so, 1 saying what
# differs.
set -uo pipefail
top=${1:?usage: check-test-summary.sh TOP}
cd "$top" || exit 1
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
bad() { echo "check-test-summary: $*" >&2; exit 1; }

mkdir -p "$t/a/meson-logs" "$t/b/meson-logs"
cat >"$t/a/meson-logs/testlog.json" <<'J'
{"name": "cache", "result": "OK"}
{"name": "remote-pause-stalls-one-device", "result": "FAIL"}
{"name": "vm-only", "result": "SKIP"}
{"name": "known-bad", "result": "EXPECTEDFAIL"}
J
cat >"$t/b/meson-logs/testlog.json" <<'J'
{"name": "cache", "result": "OK"}
{"name": "drain-progress", "result": "TIMEOUT"}
J

# A run with failures in two stages and a third stage's count line.
out=$(
	source scripts/lib-test-summary.sh
	stage "plain tests"
	count "$t/a" plain
	stage "asan tests"
	count "$t/b" asan
	stage_end
	add_summary "19 passed, 0 failed"
	summary
	echo "status $?"
) || bad "the summary failed to run: $out"
last=$(tail -n 2 <<<"$out" | head -n 1)
counts=$(tail -n 3 <<<"$out" | head -n 1)
[[ $counts == "22 passed, 2 failed, 1 skipped" ]] ||
	bad "the counts line is '$counts', not '22 passed, 2 failed, 1 skipped'"
[[ $last == "failed: plain:remote-pause-stalls-one-device asan:drain-progress" ]] ||
	bad "the last line is '$last', not the failed tests by name"
[[ $(tail -n 1 <<<"$out") == "status 1" ]] || bad "a failed run returns 0"
grep -qE '^=== plain tests: [0-9]+ s ===$' <<<"$out" || bad "no time for the plain stage: $out"

# A clean run: the counts line is the last.
out=$(
	source scripts/lib-test-summary.sh
	add_summary "5 passed, 0 failed, 1 skipped"
	summary
	echo "status $?"
)
[[ $(tail -n 2 <<<"$out" | head -n 1) == "5 passed, 0 failed, 1 skipped" ]] ||
	bad "a clean run does not end with its counts: $out"
[[ $(tail -n 1 <<<"$out") == "status 0" ]] || bad "a clean run returns non-zero"
echo "test.sh's closing lines name the failed tests"
