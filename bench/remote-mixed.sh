#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# remote-mixed.sh - mixed random reads and writes through wbd on a remote
# whose reads need a FLUSH to see writes made on another connection.
#
#   bash bench/remote-mixed.sh [--quick]
#
# A remote backing device that offers multi-conn promises a write is seen
# on every connection only once a FLUSH has covered it, so wbd sends a
# FLUSH before a cache miss that reads a range written back since the
# last one (docs/remote.md, "A read after writeback").  This measures what
# that costs under a load that keeps both going: fio 4 KiB random reads
# and writes (BENCH_MIX % reads, default 70; queue depth 16, one
# connection, BENCH_RUNTIME seconds) through wbd with a cache smaller than
# the export (BENCH_CACHE, default 128M; BENCH_SIZE, default 1G), whose
# backing is `nbdkit file` (multi-conn, FLUSH = fdatasync) on a file of
# random data in BENCH_TMPDIR, behind nbdkit's stats filter.  Every round
# starts fresh servers and prints wbd's read and write IOPS, the read
# latency (median and 99th percentile) and the READs, WRITEs and FLUSHes
# the remote received; then the medians over BENCH_ROUNDS rounds.
#
# Options:
#   --quick          one round of 3 s (a check that it works)
#
# Environment: as bench/run.sh - BENCH_RUNTIME (default 10), BENCH_ROUNDS
# (default 3), BENCH_SIZE, BENCH_TMPDIR, BENCH_KEEP=1, WBD, WBCTL,
# WBD_SKIP_DEPS=1, BENCH_WBD_VERSION - and BENCH_CACHE, BENCH_MIX.  Nothing is written to
# docs/; the figures in docs/remote.md come from this script.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

QUICK=
while (($# > 0)); do
	case $1 in
	--quick) QUICK=1 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "remote-mixed: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
[[ -n $QUICK ]] && export BENCH_ROUNDS=1 BENCH_RUNTIME=3

# shellcheck source=bench/run.sh
source "$(dirname "${BASH_SOURCE[0]}")/run.sh"

CACHE=${BENCH_CACHE:-128M}
MIX=${BENCH_MIX:-70}

install_deps
build_wbd
build_wbctl
T=$(mktemp -d "${BENCH_TMPDIR:-/var/tmp}/wbd-rmix.XXXXXX")
((${#T} < 80)) || die "temporary directory $T is too long for Unix socket paths"
say "wbd ${BENCH_WBD_VERSION:-$(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown)} ($WBD);" \
    "$RT s per round, $ROUNDS round(s); cache $CACHE, export $SIZE, $MIX% reads"

say "writing $SIZE of random data for the remote"
head -c "$(numfmt --from=iec "$SIZE")" /dev/urandom >"$T/remote.img"

# stat_ops FILE OP: the operations of type OP the stats filter counted.
stat_ops() { awk -v op="$2:" '$1 == op { print $2; exit }' "$1"; }

declare -a V_RIOPS V_WIOPS V_P50 V_P99 V_READS V_WRITES V_FLUSHES
for ((r = 1; r <= ROUNDS; r++)); do
	stats=$T/stats-r$r.txt
	spawn "$T/nbdkit-r$r.log" nbdkit -f -U "$T/kit.sock" --filter=stats \
	    file "$T/remote.img" statsfile="$stats" statsappend=false
	kpid=$SRV_PID
	wait_ready "$kpid" "nbd+unix:///?socket=$T/kit.sock" || die "nbdkit did not start"
	cat >"$T/wbd.conf" <<-EOF
	# written by bench/remote-mixed.sh
	listen = { unix = [ "$T/wbd.sock" ]; };
	control = { socket = "$T/ctl.sock"; };
	cache = { size = "$CACHE"; page_size = "4K"; };
	exports = (
	  { name = "disk0"; backing = "nbd+unix:///?socket=$T/kit.sock"; cache_mode = "writeback"; }
	);
	EOF
	spawn "$T/wbd-r$r.log" "$WBD" -f -c "$T/wbd.conf"
	wpid=$SRV_PID
	uri="nbd+unix:///disk0?socket=$T/wbd.sock"
	wait_ready "$wpid" "$uri" || die "wbd did not start: $(tail -n 3 "$T/wbd-r$r.log")"
	wbd_settled "$T/ctl.sock"
	out=$T/fio-r$r.json
	run_fio "$out" "$uri" --rw=randrw --rwmixread="$MIX" --bs=4k \
	    --iodepth=16 --time_based --runtime="$RT" --size="$SIZE" ||
		die "fio failed (see $T/fio.log)"
	stop_pid "$wpid" 120 || die "wbd exited with status $? on SIGTERM"
	stop_pid "$kpid" 20 || true     # writes the statsfile
	read -r riops wiops p50 p99 < <(jq -r '.jobs[0] | [.read.iops, .write.iops,
	    .read.clat_ns.percentile["50.000000"] / 1000,
	    .read.clat_ns.percentile["99.000000"] / 1000] | map(floor) | @tsv' "$out")
	V_RIOPS+=("$riops") V_WIOPS+=("$wiops") V_P50+=("$p50") V_P99+=("$p99")
	V_READS+=("$(stat_ops "$stats" read)") V_WRITES+=("$(stat_ops "$stats" write)")
	V_FLUSHES+=("$(stat_ops "$stats" flush)")
	say "$(printf 'round %d: reads %s IOPS, writes %s IOPS, read latency p50 %s us p99 %s us; the remote got %s READs, %s WRITEs, %s FLUSHes' \
	    "$r" "$riops" "$wiops" "$p50" "$p99" "${V_READS[-1]}" "${V_WRITES[-1]}" "${V_FLUSHES[-1]}")"
	rm -f "$T"/*.sock
done
say "$(printf 'median of %d: reads %s IOPS, writes %s IOPS, p50 %s us, p99 %s us; remote READs %s, WRITEs %s, FLUSHes %s (the last includes shutdown'"'"'s)' \
    "$ROUNDS" "$(median "${V_RIOPS[@]}")" "$(median "${V_WIOPS[@]}")" \
    "$(median "${V_P50[@]}")" "$(median "${V_P99[@]}")" "$(median "${V_READS[@]}")" \
    "$(median "${V_WRITES[@]}")" "$(median "${V_FLUSHES[@]}")")"
