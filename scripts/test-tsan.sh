#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# test-tsan.sh - build wbd with clang and ThreadSanitizer and run the unit
# tests, the stress test (suite "stress": fio writers with verify, tunes,
# reloads and status polling at once) and the integration tests of suite
# "tsan" (connections closed by the stall timeout while their requests
# complete: tests/integration/meson.build) in that build.  Any TSan report
# fails the test that produced it.
#
# Usage: bash scripts/test-tsan.sh [extra `meson test` arguments]
# Environment: TSAN_BUILD_DIR (default build-tsan); CI=true builds with
# -Dwerror=true; WBD_SKIP_DEPS=1 skips the apt step; STRESS_SECONDS (default
# 40) sets how long the stress test runs.
# Ends with one line: "N passed, N failed[, N skipped]"; exits non-zero if
# the build or any test failed.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
TSAN_BUILD_DIR=${TSAN_BUILD_DIR:-build-tsan}
NPROC=$(nproc 2>/dev/null || echo 2)

# clang is in install-deps.sh's list (with everything else the tests use).
bash scripts/install-deps.sh || { echo "test-tsan.sh: installing dependencies failed" >&2; exit 1; }
if ! command -v clang >/dev/null 2>&1; then
	echo "test-tsan.sh: clang not found after installing dependencies" >&2
	echo "0 passed, 1 failed"
	exit 1
fi

opts=(-Dtests=enabled -Db_sanitize=thread -Db_lundef=false)
if [[ ${CI:-} == true ]]; then
	opts+=(-Dwerror=true)
fi

fail_build() {
	echo "test-tsan.sh: $*" >&2
	echo "0 passed, 1 failed"
	exit 1
}

echo "=== TSan build ($TSAN_BUILD_DIR) ==="
if [[ -f $TSAN_BUILD_DIR/meson-private/coredata.dat ]]; then
	meson configure "$TSAN_BUILD_DIR" "${opts[@]}" ||
		fail_build "meson configure of $TSAN_BUILD_DIR failed"
else
	CC=clang meson setup "$TSAN_BUILD_DIR" "${opts[@]}" ||
		fail_build "meson setup of $TSAN_BUILD_DIR failed"
fi
grep -q '"command": "clang' "$TSAN_BUILD_DIR/compile_commands.json" ||
	fail_build "$TSAN_BUILD_DIR was not set up with clang; remove it and run again"
ninja -C "$TSAN_BUILD_DIR" || fail_build "building $TSAN_BUILD_DIR failed"

# A report ends the process with status 66 (unit tests), or is found in
# the daemon's log (the stress test); halt_on_error=0 lets one run show
# every race.  The stress test adds its suppressions file itself.
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=0 second_deadlock_stack=1}
# Tests that time a client against its unloaded time allow for TSan's
# slowdown (test-client-share-under-read-flood.sh).
export WBD_TSAN=1

echo "=== TSan tests: unit, stress, tsan ==="
rm -f "$TSAN_BUILD_DIR/meson-logs/testlog.json"
STATUS=0
meson test -C "$TSAN_BUILD_DIR" --print-errorlogs --num-processes "$NPROC" \
	--timeout-multiplier 3 --suite unit --suite stress --suite tsan "$@" ||
	STATUS=1

log=$TSAN_BUILD_DIR/meson-logs/testlog.json
if [[ ! -f $log ]]; then
	echo "test-tsan.sh: no test log in $TSAN_BUILD_DIR" >&2
	echo "0 passed, 1 failed"
	exit 1
fi
read -r p f s < <(python3 scripts/testlog-count.py "$log") || { echo "test-tsan.sh: cannot read $log" >&2; echo "0 passed, 1 failed"; exit 1; }

((f == 0)) || STATUS=1
if ((s > 0)); then
	echo "$p passed, $f failed, $s skipped"
else
	echo "$p passed, $f failed"
fi
exit "$STATUS"
