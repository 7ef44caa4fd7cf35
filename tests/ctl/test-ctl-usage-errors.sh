#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# wbctl's own errors, with a daemon running: a bad option, an unknown
# command, a missing argument, a malformed KEY=VALUE, --all with names
# are usage errors (exit 2, "wbctl: ..." on stderr, nothing sent to the
# daemon); --help and -V exit 0 and document the exit codes.
source "${SRCDIR:-$(dirname "$0")}/lib-ctl.sh"

add_export disk0 16M rw
start_wbd
expect_exit 0 wbctl tune
before=$OUT

expect_exit 0 "$WBCTL" --help
for code in 0 1 2 3 4 5 6; do
	assert_match "^  $code  " "$OUT" "--help documents exit status $code"
done
assert_match 'WBD_CONTROL_SOCKET' "$OUT" "--help names the environment variable"
expect_exit 0 "$WBCTL" -V
assert_match '^wbctl [0-9]+\.[0-9]+\.[0-9]+' "$OUT" "-V"
expect_exit 0 "$WBCTL" help
assert_match '^Usage: wbctl' "$OUT" "wbctl help"

usage_cases=(
	""
	"--bogus status"
	"-x status"
	"-s"
	"frobnicate"
	"help frobnicate"
	"status --bogus"
	"status extra"
	"status -w -1"
	"exports extra"
	"version extra"
	"reload now"
	"tune =1"
	"tune dirty_ratio="
	"tune dirty_ratio dirty_bytes=1M"
	"flush --all disk0"
	"flush --bogus"
)
for args in "${usage_cases[@]}"; do
	# shellcheck disable=SC2086
	expect_exit 2 wbctl $args
	head -n1 <<<"$ERR" | grep -q '^wbctl: ' || fail "wbctl $args: stderr: $ERR"
	[[ -z $OUT ]] || fail "wbctl $args: printed on stdout: $OUT"
done
expect_exit 0 wbctl tune
[[ $OUT == "$before" ]] || fail "a usage error changed settings"
grep -q 'control: .*uid' "$LOG" && fail "a usage error reached the daemon: $(grep 'control: ' "$LOG")"
assert_alive
