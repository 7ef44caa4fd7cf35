#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# remote-drain.sh - writeback parallelism across remote devices (issue 5).
#
#   bash bench/remote-drain.sh
#
# Starts N nbdkit memory servers, each behind --filter=rate (burstiness
# 0.1 s, so the limit holds from the start) at the same
# bandwidth, each its own writeback device (flush-43:N), and one wbd with an
# export on each.  Writes DRAIN_MIB of random data into every export (it
# stays dirty: periodic and background writeback are off), then times one
# `wbctl flush` of all of them.  Run with one device and with four: per-device
# flusher pools drain in parallel, so four should take about as long as one
# (goal: at most 1.2x); a single flusher would take four times as long.
#
# Environment: DRAIN_MIB (default 256), DRAIN_RATE (nbdkit rate filter,
# bits per second, default 256M = 32 MB/s), WBD / WBCTL (binaries; default
# build-bench/ built here), WBD_SKIP_DEPS=1.  Appends nothing to docs:
# prints the figures.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MIB=${DRAIN_MIB:-256}
RATE=${DRAIN_RATE:-256M}

bash "$REPO/scripts/install-deps.sh" >/dev/null
if [[ -z ${WBD:-} ]]; then
	[[ -d $REPO/build-bench ]] || meson setup "$REPO/build-bench" --buildtype=release -Dtests=disabled >/dev/null
	ninja -C "$REPO/build-bench" >/dev/null
	WBD=$REPO/build-bench/daemon/wbd
	WBCTL=$REPO/build-bench/client/wbctl
fi
WBCTL=${WBCTL:-$(dirname "$WBD")/../client/wbctl}

T=$(mktemp -d "${TMPDIR:-/var/tmp}/wbd-drain.XXXXXX")
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null || true
	done
	rm -rf "$T"
}
trap cleanup EXIT

head -c $((MIB << 20)) /dev/urandom >"$T/data"

# run N: the seconds one FLUSH of N devices with MIB dirty each takes.
run() {
	local n=$1 i conf=$T/wbd-$1.conf
	PIDS=()
	{
		echo "listen = { unix = [ \"$T/wbd.sock\" ]; };"
		echo "control = { socket = \"$T/ctl.sock\"; };"
		echo "cache = { size = \"$((n * MIB * 2 + 256))M\"; };"
		echo "writeback = { dirty_background_ratio = 90; dirty_ratio = 95;"
		echo "  dirty_writeback_centisecs = 0; max_workers = 8; };"
		echo "exports = ("
		for ((i = 0; i < n; i++)); do
			nbdkit -f -U "$T/n$i.sock" --filter=rate memory \
				size=${MIB}M rate="$RATE" burstiness=0.1 &
			PIDS+=($!)
			echo "  { name = \"d$i\"; backing = \"nbd+unix:///?socket=$T/n$i.sock\"; }$([[ $((i + 1)) -lt $n ]] && echo ,)"
		done
		echo ");"
	} >"$conf"
	for ((i = 0; i < n; i++)); do
		for _ in $(seq 100); do [[ -S $T/n$i.sock ]] && break; sleep 0.05; done
	done
	"$WBD" -f -c "$conf" 2>"$T/wbd-$n.log" &
	PIDS+=($!)
	for _ in $(seq 100); do [[ -S $T/ctl.sock ]] && break; sleep 0.05; done
	local copies=()
	for ((i = 0; i < n; i++)); do
		nbdcopy "$T/data" "nbd+unix:///d$i?socket=$T/wbd.sock" &
		copies+=($!)
	done
	for p in "${copies[@]}"; do wait "$p"; done
	# Everything is dirty in the cache now; time the drain.
	local t0 t1
	t0=$(date +%s.%N)
	"$WBCTL" -s "$T/ctl.sock" flush >/dev/null 2>&1
	t1=$(date +%s.%N)
	for ((i = 0; i < n; i++)); do
		nbdcopy "nbd+unix:///?socket=$T/n$i.sock" - |
			cmp - "$T/data" >&2 || { echo "device $i: data differs" >&2; cat "$T/wbd-$n.log" >&2; exit 1; }
	done
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -f "$T"/*.sock
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }'
}

one=$(run 1)
four=$(run 4)
ratio=$(awk -v a="$one" -v b="$four" 'BEGIN { printf "%.3f", b / a }')
printf 'drain of %d MiB dirty per device at rate=%s (bits/s) per device:\n' "$MIB" "$RATE"
printf '  1 device:  %6.2f s\n  4 devices: %6.2f s\n  ratio:     %6.2fx  (goal <= 1.2x; a single flusher: ~4x)\n' \
	"$one" "$four" "$ratio"
