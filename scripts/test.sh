#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# test.sh - install the dependencies, build wbd twice (plain, and with
# AddressSanitizer + UndefinedBehaviorSanitizer) and run the whole test suite
# (unit and integration) in both builds; the Debian package end to end
# (the suite "package", which the default test setup leaves out: it builds
# the package, installs, runs and purges it; once, with the plain build,
# about a minute and a half; skipped unless root); then a clang
# ThreadSanitizer build with the stress test (scripts/test-tsan.sh), each
# libFuzzer target for WBD_FUZZ_SECONDS (default 60; scripts/fuzz.sh), each
# counted as a test, and the kernel's NBD client against the plain build's
# wbd in a VM (tests/vm/test-vm-kernel-client.sh, one test; skipped, with
# the reason, when qemu or a kernel cannot be had).
#
# Usage: bash scripts/test.sh [extra `meson test` arguments, e.g. a suite]
# Environment: CI=true builds with -Dwerror=true; BUILD_DIR / ASAN_BUILD_DIR
# change the build directories (default build, build-asan); WBD_SKIP_DEPS=1
# skips the apt step; WBD_SKIP_ASAN=1 skips the sanitized build and
# WBD_SKIP_PACKAGE=1 the package test, WBD_SKIP_TSAN=1 the
# ThreadSanitizer build, WBD_SKIP_FUZZ=1 the fuzzing, WBD_SKIP_VM=1 the VM
# test.  WBD_QUICK=1 runs only the plain build's suite (what a change
# most often needs; the README gives each stage's time).
# Ends with the line "N passed, N failed[, N skipped]" and, when anything
# failed, one more: "failed: " and each failed test, as STAGE:NAME (plain,
# package, asan, tsan, fuzz, vm); exits non-zero if any build or test
# failed.  Each stage ends with a line "=== STAGE: N s ===", its time.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [[ -n ${WBD_QUICK:-} ]]; then
	WBD_SKIP_ASAN=1 WBD_SKIP_PACKAGE=1 WBD_SKIP_TSAN=1 WBD_SKIP_FUZZ=1 WBD_SKIP_VM=1
fi
BUILD_DIR=${BUILD_DIR:-build}
ASAN_BUILD_DIR=${ASAN_BUILD_DIR:-build-asan}
NPROC=$(nproc 2>/dev/null || echo 2)

common_opts=(-Dtests=enabled)
if [[ ${CI:-} == true ]]; then
	common_opts+=(-Dwerror=true)
fi

# setup DIR OPTIONS...: configure DIR (or reconfigure it if it exists).
setup() {
	local dir=$1
	shift
	if [[ -f $dir/meson-private/coredata.dat ]]; then
		meson configure "$dir" "$@"
	else
		meson setup "$dir" "$@"
	fi
}

# The totals, the stages' times and the closing lines.
source scripts/lib-test-summary.sh

# run_suite NAME DIR OPTIONS...: build DIR and run its tests.
run_suite() {
	local name=$1 dir=$2
	shift 2
	stage "$name build ($dir)"
	rm -f "$dir/meson-logs/testlog.json"
	if ! setup "$dir" "${common_opts[@]}" "$@"; then
		echo "test.sh: meson setup of $dir failed" >&2
		STATUS=1 FAILED=$((FAILED + 1))
		failed "$name:setup"
		return
	fi
	if ! ninja -C "$dir"; then
		echo "test.sh: building $dir failed" >&2
		STATUS=1 FAILED=$((FAILED + 1))
		failed "$name:build"
		return
	fi
	stage "$name tests"
	meson test -C "$dir" --print-errorlogs --num-processes "$NPROC" \
		"${TEST_ARGS[@]}" "${EXTRA_ARGS[@]}" || STATUS=1
	count "$dir" "$name"
}

EXTRA_ARGS=("$@")
TEST_ARGS=()
stage "dependencies (scripts/install-deps.sh)"
bash scripts/install-deps.sh || { echo "test.sh: installing dependencies failed" >&2; exit 1; }

run_suite plain "$BUILD_DIR" -Db_sanitize=none

# The package suite, once, in the plain build: it tests the package
# scripts/build-deb.sh makes of the tree, which a sanitized build would not
# change.  Without the extra arguments, which pick among the default
# setup's suites.
if [[ -z ${WBD_SKIP_PACKAGE:-} ]]; then
	stage "the Debian package (suite package)"
	rm -f "$BUILD_DIR/meson-logs/testlog.json"
	meson test -C "$BUILD_DIR" --print-errorlogs --suite package || STATUS=1
	if [[ -f $BUILD_DIR/meson-logs/testlog.json ]]; then
		count "$BUILD_DIR" package
	else
		echo "test.sh: the package suite did not run" >&2
		STATUS=1 FAILED=$((FAILED + 1))
		failed package:not-run
	fi
fi

if [[ -z ${WBD_SKIP_ASAN:-} ]]; then
	export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
	export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
	TEST_ARGS=(--timeout-multiplier 3)
	run_suite asan "$ASAN_BUILD_DIR" \
		-Db_sanitize=address,undefined -Db_lundef=false
fi

if [[ -z ${WBD_SKIP_TSAN:-} ]]; then
	stage "ThreadSanitizer build and stress test"
	tsan_out=$(mktemp)
	WBD_SKIP_DEPS=1 bash scripts/test-tsan.sh 2>&1 | tee "$tsan_out"
	rc=${PIPESTATUS[0]}
	add_summary "$(tail -n 1 "$tsan_out")"
	rm -f "$tsan_out"
	tsan_log=${TSAN_BUILD_DIR:-build-tsan}/meson-logs/testlog.json
	if [[ -f $tsan_log ]]; then
		while IFS= read -r n; do
			[[ -n $n ]] && failed "tsan:$n"
		done < <(python3 scripts/testlog-count.py --failed "$tsan_log")
	fi
	if ((rc != 0)); then
		STATUS=1
		[[ " ${FAILED_NAMES[*]} " == *" tsan:"* ]] || failed tsan:build
	fi
fi

if [[ -z ${WBD_SKIP_FUZZ:-} ]]; then
	stage "fuzzing: each target for ${WBD_FUZZ_SECONDS:-60} s"
	fuzz_out=$(mktemp)
	WBD_SKIP_DEPS=1 bash scripts/fuzz.sh "${WBD_FUZZ_SECONDS:-60}" 2>&1 |
	    tee "$fuzz_out"
	rc=${PIPESTATUS[0]}
	# One line per target: "  NAME: N executions, ..." (", CRASH" if so).
	ok=$(grep -cE '^  [a-z-]+: [0-9]+ executions' "$fuzz_out" || true)
	bad=$(grep -cE '^  [a-z-]+: .*CRASH' "$fuzz_out" || true)
	PASSED=$((PASSED + ok - bad)) FAILED=$((FAILED + bad))
	while IFS= read -r n; do
		failed "fuzz:$n"
	done < <(sed -nE 's/^  ([a-z-]+): .*CRASH.*/\1/p' "$fuzz_out")
	((rc == 0)) || { STATUS=1; ((bad > 0)) || { FAILED=$((FAILED + 1)); failed fuzz:build; }; }
	rm -f "$fuzz_out"
fi

if [[ -z ${WBD_SKIP_VM:-} ]]; then
	stage "the kernel's NBD client in a VM (tests/vm)"
	bash tests/vm/test-vm-kernel-client.sh "$BUILD_DIR/daemon/wbd"
	case $? in
	0) PASSED=$((PASSED + 1)) ;;
	77) SKIPPED=$((SKIPPED + 1)) ;;
	*) FAILED=$((FAILED + 1)) STATUS=1; failed vm:kernel-client ;;
	esac
fi
stage_end

summary
exit
