#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# fuzz.sh - build wbd's libFuzzer targets (tests/fuzz) with clang,
# AddressSanitizer and UndefinedBehaviorSanitizer, and run each in turn.
#
# Usage: bash scripts/fuzz.sh [SECONDS] [TARGET...]
#   SECONDS  how long each target runs (default 60)
#   TARGET   handshake, proto, config, ctl-request, nbd-replies (default: all)
# Environment: FUZZ_BUILD_DIR (default build-fuzz); WBD_SKIP_DEPS=1 skips
# the apt step.
#
# Each target starts from its seed corpus (tests/fuzz/corpus/TARGET),
# copied to FUZZ_BUILD_DIR/corpus/TARGET, where what it finds accumulates
# from run to run; the tree is not modified.  Crash, timeout and
# out-of-memory inputs go to FUZZ_BUILD_DIR/crashes/.  Prints per target
# the executions, executions per second and any crash; exits non-zero if
# any target crashed or could not be built.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
SECONDS_PER_TARGET=${1:-60}
shift || true
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=(handshake proto config ctl-request nbd-replies journal)
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
NPROC=$(nproc 2>/dev/null || echo 2)

if ! [[ $SECONDS_PER_TARGET =~ ^[0-9]+$ ]] || ((SECONDS_PER_TARGET == 0)); then
	echo "usage: fuzz.sh [SECONDS] [TARGET...]" >&2
	exit 2
fi

bash scripts/install-deps.sh || { echo "fuzz.sh: installing dependencies failed" >&2; exit 1; }

opts=(-Dfuzz=enabled -Dtests=enabled -Db_sanitize=address,undefined
	-Db_lundef=false -Dbuildtype=debugoptimized)
if [[ -f $BUILD/meson-private/coredata.dat ]]; then
	meson configure "$BUILD" "${opts[@]}" >/dev/null
else
	CC=clang meson setup "$BUILD" "${opts[@]}" >/dev/null
fi || { echo "fuzz.sh: configuring $BUILD failed" >&2; exit 1; }
targets=()
for t in "${TARGETS[@]}"; do
	targets+=("tests/fuzz/fuzz-$t")
done
ninja -C "$BUILD" -j "$NPROC" "${targets[@]}" ||
	{ echo "fuzz.sh: building the fuzz targets failed" >&2; exit 1; }

mkdir -p "$BUILD/crashes"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/fuzz/lsan.supp}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
STATUS=0
SUMMARY=()
for t in "${TARGETS[@]}"; do
	seeds=tests/fuzz/corpus/$t
	work=$BUILD/corpus/$t
	log=$BUILD/fuzz-$t.log
	mkdir -p "$work"
	cp -n "$seeds"/* "$work"/ 2>/dev/null || true
	dict=()
	[[ -f tests/fuzz/$t.dict ]] && dict=(-dict="tests/fuzz/$t.dict")
	echo "fuzz.sh: $t for ${SECONDS_PER_TARGET}s (log: $log)"
	"$BUILD/tests/fuzz/fuzz-$t" -max_total_time="$SECONDS_PER_TARGET" \
	    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	    -artifact_prefix="$BUILD/crashes/$t-" "${dict[@]}" \
	    "$work" >"$log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n1)
	units=$(find "$work" -type f | wc -l)
	line="$t: ${execs:-?} executions, ${rate:-?} exec/s, corpus $units inputs"
	if ((rc != 0)); then
		STATUS=1
		what=$(grep -m1 -E '^==[0-9]+==ERROR|^SUMMARY|invariant broken|runtime error|ALARM|out-of-memory' "$log")
		arts=$(grep -o "Test unit written to [^ ]*" "$log" | sed 's/Test unit written to //' | tr '\n' ' ')
		line+=", CRASH (exit $rc): ${what:-see $log}; input: ${arts:-none}"
	fi
	echo "$line"
	SUMMARY+=("$line")
done

echo "fuzz.sh: ${SECONDS_PER_TARGET}s per target"
printf '  %s\n' "${SUMMARY[@]}"
exit $STATUS
