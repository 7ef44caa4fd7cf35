# SPDX-License-Identifier: GPL-2.0-or-later
# lib-test-summary.sh - the totals of scripts/test.sh, sourced by it (and
# by tests/tree/check-test-summary.sh): the stages' headings with their
# times, the counts of each meson testlog.json and of the other stages,
# the failed tests by name, and the closing lines.  Runs from the top of
# the tree (scripts/testlog-count.py).
# shellcheck shell=bash

PASSED=0 FAILED=0 SKIPPED=0 STATUS=0
FAILED_NAMES=()   # STAGE:NAME of each failure, for the last line
STAGE_START=$SECONDS STAGE=

# stage NAME: a heading; the one before it gets its time.
stage() {
	stage_end
	STAGE=$1 STAGE_START=$SECONDS
	echo "=== $1 ==="
}
stage_end() {
	[[ -n $STAGE ]] && echo "=== $STAGE: $((SECONDS - STAGE_START)) s ==="
	STAGE=
}

# failed NAME...: note failures (STAGE:NAME) for the last line.
failed() {
	FAILED_NAMES+=("$@")
}

# count DIR STAGE: add DIR's meson-logs/testlog.json results to the totals
# and its failed tests, as STAGE:NAME, to the list.
count() {
	local log=$1/meson-logs/testlog.json counts n
	if [[ ! -f $log ]]; then
		echo "test.sh: no test log in $1" >&2
		return
	fi
	counts=$(python3 scripts/testlog-count.py "$log") || { echo "test.sh: cannot read $log" >&2; STATUS=1; failed "$2:testlog"; return; }
	read -r p f s <<<"$counts"
	PASSED=$((PASSED + p)) FAILED=$((FAILED + f)) SKIPPED=$((SKIPPED + s))
	while IFS= read -r n; do
		[[ -n $n ]] && failed "$2:$n"
	done < <(python3 scripts/testlog-count.py --failed "$log")
}

# add_summary LINE: add a "N passed, N failed[, N skipped]" line's counts.
add_summary() {
	local p f s=0
	read -r p _ f _ s _ <<<"${1//,/}"
	[[ $p =~ ^[0-9]+$ && $f =~ ^[0-9]+$ ]] || { FAILED=$((FAILED + 1)); return; }
	[[ $s =~ ^[0-9]+$ ]] || s=0
	PASSED=$((PASSED + p)) FAILED=$((FAILED + f)) SKIPPED=$((SKIPPED + s))
}

# summary: the closing lines -- the time in all; "N passed, N failed[, N
# skipped]"; and when anything failed, "failed: STAGE:NAME ..." last, so
# that the last line of a failed run names what failed.  Returns the
# status to exit with.
summary() {
	((FAILED == 0)) || STATUS=1
	echo "test.sh: $((SECONDS / 60)) min $((SECONDS % 60)) s in all"
	if ((SKIPPED > 0)); then
		echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
	else
		echo "$PASSED passed, $FAILED failed"
	fi
	if ((${#FAILED_NAMES[@]} > 0)); then
		echo "failed: ${FAILED_NAMES[*]}"
	elif ((STATUS != 0)); then
		echo "failed: a stage that counts no test (see above)"
	fi
	return "$STATUS"
}
