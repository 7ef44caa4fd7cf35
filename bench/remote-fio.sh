#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# remote-fio.sh - bench/run.sh's fio cases with a remote backing device.
#
#   bash bench/remote-fio.sh [--quick] [--slow[=RATE]]
#
# Runs the four fio loads of bench/run.sh - 4K randwrite, 4K randread, 1M
# write, 1M read (same fio options, one job, one connection, --time_based,
# the median of BENCH_ROUNDS rounds; no burst profile) - against:
#
#   remote           nbdkit memory on a Unix socket, driven directly;
#   wbd+remote       wbd (the cache settings of bench/run.sh: cache.size 2G,
#                    4K pages, dirty_ratio 80) with one export whose backing
#                    is that nbdkit memory, "nbd+unix:///?socket=PATH";
#                    the export is filled through wbd and FLUSHed first,
#                    so the cache holds all of it, clean (as bench/run.sh
#                    does for wbd on a file);
#   wbd+remote-cold  read cases only: the remote is filled directly and wbd
#                    starts with an empty cache, so reads miss until the
#                    pages they touch have been read once; fio runs with
#                    --io_size=BENCH_SIZE instead of --time_based (one pass
#                    over the export, or BENCH_RUNTIME seconds if sooner),
#                    and the report gives the cache misses.
#
# With --slow, the same for an nbdkit memory behind --filter=rate
# (rate=RATE bits/s, default 200M: nbdkit takes M as 2^20, so 25 MiB/s each
# way; burstiness 0.1 s) and
# a smaller export (BENCH_SLOW_SIZE): remote-slow and wbd+remote-slow.
#
# Every fio run gets fresh servers: nbdkit is started, then wbd, the export
# is filled by one sequential 1 MiB pass and FLUSHed, fio runs, and then
# one NBD FLUSH (bench/nbd-flush.py) is timed: for wbd, that is the
# writeback of what the case left dirty, whose amount `wbctl status` gives
# just before; wbctl checks that nothing is dirty after it.  Then wbd and
# nbdkit are stopped by their PIDs.  Within a round, each case runs on
# every configuration in turn, the order rotated each round.
#
# Prints the tables and writes them, with the raw fio JSON, the servers'
# logs and configurations, to bench/results/STAMP-remote-fio/ (report.md).
# docs/benchmarks.md is not written.  The functions come from bench/run.sh,
# which is sourced.
#
# Options:
#   --quick          one round of 3 s per case (a check that it works)
#   --slow[=RATE]    add the rate-limited remote (default RATE 200M)
#
# Environment: as bench/run.sh - BENCH_RUNTIME (default 10), BENCH_ROUNDS
# (default 3), BENCH_SIZE (default 1G), BENCH_TMPDIR, BENCH_KEEP=1, WBD,
# WBCTL (default: next to WBD), BENCH_WBD_VERSION, WBD_SKIP_DEPS=1 (not
# BENCH_CASES: the four cases above) - and
# BENCH_SLOW_SIZE (default 256M; 64M with --quick), BENCH_WRITEBACK_KEYS
# (more keys for wbd's writeback group, e.g. "min_workers = 8;").
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

SLOW_RATE=
QUICK=
while (($# > 0)); do
	case $1 in
	--quick) QUICK=1 ;;
	--slow) SLOW_RATE=200M ;;
	--slow=*) SLOW_RATE=${1#--slow=} ;;
	-h | --help) usage; exit 0 ;;
	*) echo "remote-fio: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
if [[ -n $QUICK ]]; then
	export BENCH_ROUNDS=1 BENCH_RUNTIME=3
	SLOW_SIZE=${BENCH_SLOW_SIZE:-64M}
else
	SLOW_SIZE=${BENCH_SLOW_SIZE:-256M}
fi

# bench/run.sh: settings (RT, ROUNDS, SIZE, WBD_CACHE, WBD_DIRTY_RATIO),
# the EXIT trap that stops every PID in PIDS, and the functions used below.
# It stops before its main part when sourced.
# shellcheck source=bench/run.sh
source "$(dirname "${BASH_SOURCE[0]}")/run.sh"

# bench/run.sh's four fio loads, without its burst and sustained profiles
# (wbd keeps its configuration's thresholds) or its 4-connection cases.
CASES=(randwrite-4k randread-4k write-1m read-1m)

RESULTS=$REPO/bench/results/$STAMP-remote-fio
CONFIGS=(remote wbd+remote wbd+remote-cold)
SLOW_CONFIGS=(remote-slow wbd+remote-slow)
LOAD_START=$(uptime)
LOADS=()         # 1-minute load average when each fio run started
WB_KEYS=${BENCH_WRITEBACK_KEYS:-}

# --- the configurations -------------------------------------------------------

is_wbd() { [[ $1 == wbd+* ]]; }
is_slow() { [[ $1 == *-slow ]]; }
is_cold() { [[ $1 == *-cold ]]; }

# applies CONFIG CASE: whether CONFIG runs CASE.
applies() { ! is_cold "$1" || [[ $2 == *read* ]]; }

K_PID='' W_PID='' URI='' CTL=''

# write_conf FILE SOCKET CONTROL BACKING: bench/run.sh's wbd settings, a
# control socket, an export on BACKING of the remote's size.
write_conf() {
	cat >"$1" <<-EOF
	# written by bench/remote-fio.sh
	listen = { unix = [ "$2" ]; };
	control = { socket = "$3"; };
	cache = { size = "$WBD_CACHE"; page_size = "4K"; };
	writeback = { dirty_ratio = $WBD_DIRTY_RATIO; $WB_KEYS };
	exports = (
	  { name = "disk0"; backing = "$4"; cache_mode = "writeback"; }
	);
	EOF
}

# fill URI TAG: one sequential 1 MiB pass over the export, then a FLUSH.
fill() {
	local f
	if ! run_fio "$T/json/$2-fill.json" "$1" --rw=write --bs=1m --iodepth=8 ||
	   ! fio_get "$T/json/$2-fill.json" write >/dev/null; then
		STATUS+=("$2: filling the export failed")
		return 1
	fi
	f=$(nbd_flush "$1") || { STATUS+=("$2: FLUSH after the fill failed"); return 1; }
	say "$2: filled; FLUSH $f s"
}

# cfg_up CONFIG TAG: start nbdkit (and wbd) for CONFIG and fill the export;
# sets K_PID, W_PID, URI, CTL.  Fails if something did not start.
cfg_up() {
	local cfg=$1 tag=$2 ksock=$T/kit.sock kuri size=$SIZE filter=()
	K_PID='' W_PID='' URI='' CTL=''
	if is_slow "$cfg"; then
		size=$SLOW_SIZE
		filter=(--filter=rate)
	fi
	kuri="nbd+unix:///?socket=$ksock"
	if is_slow "$cfg"; then
		spawn "$T/nbdkit-$tag.log" nbdkit -f -U "$ksock" "${filter[@]}" memory \
		    size="$size" rate="$SLOW_RATE" burstiness=0.1
	else
		spawn "$T/nbdkit-$tag.log" nbdkit -f -U "$ksock" memory size="$size"
	fi
	K_PID=$SRV_PID
	if ! wait_ready "$K_PID" "$kuri"; then
		STATUS+=("$tag: nbdkit did not start")
		return 1
	fi
	if ! is_wbd "$cfg"; then
		URI=$kuri
		fill "$URI" "$tag"
		return
	fi
	# The cold configuration: the data is on the remote, not in the cache.
	if is_cold "$cfg"; then
		fill "$kuri" "$tag-remote" || return 1
	fi
	CTL=$T/ctl.sock
	write_conf "$T/wbd-$tag.conf" "$T/wbd.sock" "$CTL" "$kuri"
	spawn "$T/wbd-$tag.log" "$WBD" -f -c "$T/wbd-$tag.conf"
	W_PID=$SRV_PID
	URI="nbd+unix:///disk0?socket=$T/wbd.sock"
	if ! wait_ready "$W_PID" "$URI"; then
		STATUS+=("$tag: wbd did not start (log: $(tail -n 3 "$T/wbd-$tag.log" | tr '\n' ' '))")
		return 1
	fi
	wbd_settled "$CTL"
	is_cold "$cfg" || fill "$URI" "$tag"
}

# cfg_down TAG: stop wbd, then nbdkit.
cfg_down() {
	local rc=0
	if [[ -n $W_PID ]]; then
		stop_pid "$W_PID" 120 || rc=$?
		((rc == 0)) || STATUS+=("$1: wbd exited with status $rc on SIGTERM")
	fi
	rc=0
	if [[ -n $K_PID ]]; then
		stop_pid "$K_PID" 20 || rc=$?
		((rc == 0)) || STATUS+=("$1: nbdkit exited with status $rc on SIGTERM")
	fi
	rm -f "$T"/*.sock
	K_PID='' W_PID=''
}

# wbd_status JQ-FILTER: a figure from `wbctl --json status`.
wbd_status() { "$WBCTL" -s "$CTL" --json status | jq -er "$1"; }

declare -A R_LAT R_P99 R_CPUK R_DIRTY R_FL R_MISS R_WK R_REQ R_DRAIN  # [config,case,round]
declare -A LAT P99 CPUK DIRTY FL MISS WK REQ DRAIN                  # medians

# run_job CONFIG CASE ROUND: fresh servers, one fio run, the FLUSH timed.
run_job() {
	local cfg=$1 c=$2 r=$3 tag="$1-$2-r$3" out vals iops bw ios wt0 kt0 wt1 kt1 f d lat args
	d=$(case_dir "$c")
	if ! cfg_up "$cfg" "$tag"; then
		cfg_down "$tag"
		return 0
	fi
	out=$T/json/$tag.json
	LOADS+=("$(cut -d' ' -f1 /proc/loadavg)")
	kt0=$(cpu_ticks "$K_PID") wt0=0
	[[ -n $W_PID ]] && wt0=$(cpu_ticks "$W_PID")
	args=$(case_args "$c")
	# Cold: one pass over the export (or RT seconds), not a loop over it
	# that would read from the cache after the first pass.
	is_cold "$cfg" && args="${args/--time_based/--io_size=$SIZE}"
	# shellcheck disable=SC2086
	if ! run_fio "$out" "$URI" $args || ! vals=$(fio_get "$out" "$d"); then
		STATUS+=("$cfg: fio $c failed in round $r (see fio.log)")
		cfg_down "$tag"
		return 0
	fi
	kt1=$(cpu_ticks "$K_PID") wt1=0
	[[ -n $W_PID ]] && wt1=$(cpu_ticks "$W_PID")
	read -r iops bw ios _ <<<"$vals"
	R_REQ[$cfg,$c,$r]=$ios
	lat=$(jq -r --arg d "$d" '.jobs[0][$d].clat_ns |
	    "\(.mean / 1000) \((.percentile["99.000000"] // 0) / 1000)"' "$out")
	R_IOPS[$cfg,$c,$r]=$(awk -v x="$iops" 'BEGIN { printf "%.0f", x }')
	R_MIBS[$cfg,$c,$r]=$(awk -v x="$bw" 'BEGIN { printf "%.1f", x / 1048576 }')
	R_LAT[$cfg,$c,$r]=$(awk -v x="${lat% *}" 'BEGIN { printf "%.0f", x }')
	R_P99[$cfg,$c,$r]=$(awk -v x="${lat#* }" 'BEGIN { printf "%.0f", x }')
	# Server CPU per request: wbd and nbdkit together, and nbdkit's part.
	R_CPU[$cfg,$c,$r]=$(awk -v t=$((wt1 - wt0 + kt1 - kt0)) -v hz="$HZ" -v n="$ios" \
	    'BEGIN { if (n > 0) printf "%.1f", t / hz * 1e6 / n; else print "-" }')
	R_CPUK[$cfg,$c,$r]=$(awk -v t=$((kt1 - kt0)) -v hz="$HZ" -v n="$ios" \
	    'BEGIN { if (n > 0) printf "%.1f", t / hz * 1e6 / n; else print "-" }')
	if [[ -n $W_PID ]]; then
		R_DIRTY[$cfg,$c,$r]=$(wbd_status '.exports[0].dirty_bytes / 1048576 | . * 10 | round / 10') || R_DIRTY[$cfg,$c,$r]=-
		R_MISS[$cfg,$c,$r]=$(wbd_status '.cache.misses') || R_MISS[$cfg,$c,$r]=-
	fi
	# The writeback step: everything the case left dirty, to the remote.
	f=$(nbd_flush "$URI") || { f=-; STATUS+=("$cfg: FLUSH after $c failed in round $r"); }
	R_FL[$cfg,$c,$r]=$f
	[[ -n $W_PID ]] && R_DRAIN[$cfg,$c,$r]=$(awk -v m="${R_DIRTY[$cfg,$c,$r]}" -v t="$f" \
	    'BEGIN { if (m != "-" && t != "-" && t > 0) printf "%.0f", m / t; else print "-" }')
	FLUSH_S[$cfg,$c]="${FLUSH_S[$cfg,$c]:+${FLUSH_S[$cfg,$c]}, }$f"
	if [[ -n $W_PID ]]; then
		local left
		left=$(wbd_status '.exports[0].dirty_bytes') || left='?'
		[[ $left == 0 ]] || STATUS+=("$cfg: $left bytes still dirty after the FLUSH after $c, round $r")
		R_WK[$cfg,$c,$r]=$(wbd_status '.devices[0].workers.threads') || R_WK[$cfg,$c,$r]=-
	fi
	say "$(printf 'round %s %-16s %-13s %8s IOPS %8s MiB/s  clat %6s us (p99 %6s)  CPU %6s us/req  dirty %6s MiB  FLUSH %s s  workers %s  load %s' \
	    "$r" "$cfg" "$c" "${R_IOPS[$cfg,$c,$r]}" "${R_MIBS[$cfg,$c,$r]}" "${R_LAT[$cfg,$c,$r]}" \
	    "${R_P99[$cfg,$c,$r]}" "${R_CPU[$cfg,$c,$r]}" "${R_DIRTY[$cfg,$c,$r]:--}" "$f" "${R_WK[$cfg,$c,$r]:--}" "${LOADS[-1]}")"
	cfg_down "$tag"
}

# series CONFIG...: every case on every CONFIG, ROUNDS times; the medians.
series() {
	local list=("$@") n=$# r c i cfg v a
	for ((r = 1; r <= ROUNDS; r++)); do
		say "== round $r of $ROUNDS: ${list[*]}"
		for c in "${CASES[@]}"; do
			for ((i = 0; i < n; i++)); do
				cfg=${list[(i + r - 1) % n]}
				if applies "$cfg" "$c"; then run_job "$cfg" "$c" "$r"; fi
			done
		done
	done
	SERVERS=("${list[@]}")
	compute_medians
	for cfg in "${list[@]}"; do
		for c in "${CASES[@]}"; do
			for a in LAT:%.0f P99:%.0f CPUK:%.1f DIRTY:%.0f FL:%.3f MISS:%.0f WK:%.0f REQ:%.0f DRAIN:%.0f; do
				mapfile -t v < <(round_values "R_${a%:*}" "$cfg" "$c")
				((${#v[@]} > 0)) || continue
				set_median "${a%:*}" "$cfg,$c" "$(median "${v[@]}" | awk -v f="${a#*:}" '{ printf f, $1 }')"
			done
		done
	done
}

set_median() { local -n arr=$1; arr[$2]=$3; }

# --- report ---------------------------------------------------------------------

# row_cells ARRAY CONFIG: one table row, a cell per case.
row_cells() {
	local -n arr=$1
	local c
	printf '| %s |' "$2"
	for c in "${CASES[@]}"; do printf ' %s |' "${arr[$2,$c]:--}"; done
	echo
}

header() {
	echo "| $1 | 4K randwrite QD32 | 4K randread QD32 | 1M write QD8 | 1M read QD8 |"
	echo "|---|---:|---:|---:|---:|"
}

lat_table() {
	local s c
	header configuration
	for s in "${SERVERS[@]}"; do
		printf '| %s |' "$s"
		for c in "${CASES[@]}"; do
			if [[ -n ${LAT[$s,$c]:-} ]]; then printf ' %s / %s |' "${LAT[$s,$c]}" "${P99[$s,$c]}"; else printf ' - |'; fi
		done
		echo
	done
}

cpu_split_table() {
	local s c
	header configuration
	for s in "${SERVERS[@]}"; do
		printf '| %s |' "$s"
		for c in "${CASES[@]}"; do
			if [[ -z ${CPU_US[$s,$c]:-} ]]; then printf ' - |'
			elif is_wbd "$s"; then printf ' %s (nbdkit %s) |' "${CPU_US[$s,$c]}" "${CPUK[$s,$c]}"
			else printf ' %s |' "${CPU_US[$s,$c]}"; fi
		done
		echo
	done
}

# ratio_table WBD-CONFIG... (against the remote alone of the same speed)
ratio_table() {
	local s base c
	header "ratio"
	for s in "$@"; do
		base=remote
		is_slow "$s" && base=remote-slow
		printf '| %s / %s |' "$s" "$base"
		for c in "${CASES[@]}"; do
			if applies "$s" "$c"; then printf ' %s× |' "$(ratio "$(fig "$s" "$c")" "$(fig "$base" "$c")")"; else printf ' - |'; fi
		done
		echo
	done
}

# writeback_table WBD-CONFIG...: dirty at the end of each write case and the
# FLUSH that wrote it back.
writeback_table() {
	local s c
	echo "| configuration | case | dirty after the case (MiB) | FLUSH (s) | drained (MiB/s) | FLUSH of the remote alone (s) |"
	echo "|---|---|---:|---:|---:|---:|"
	for s in "$@"; do
		for c in randwrite-4k write-1m; do
			applies "$s" "$c" || continue
			local base=remote
			is_slow "$s" && base=remote-slow
			printf '| %s | %s | %s | %s | %s | %s |\n' "$s" "$c" "${DIRTY[$s,$c]:--}" "${FL[$s,$c]:--}" \
			    "${DRAIN[$s,$c]:--}" "${FL[$base,$c]:--}"
		done
	done
}

cold_note() {
	local c
	for c in randread-4k read-1m; do
		[[ -n ${MISS[wbd+remote-cold,$c]:-} ]] || continue
		printf -- '- wbd+remote-cold, %s: %s cache misses of %s requests (medians)\n' \
		    "$c" "${MISS[wbd+remote-cold,$c]}" "${REQ[wbd+remote-cold,$c]}"
	done
}

# report SERIES-LABEL CONFIG...
report() {
	local title=$1
	shift
	SERVERS=("$@")
	local wbds=() s
	for s in "$@"; do is_wbd "$s" && wbds+=("$s"); done
	cat <<-EOF
	### $title

	Throughput (IOPS for 4 KiB, MiB/s for 1 MiB), median of $ROUNDS round(s):

	EOF
	results_table
	cat <<-EOF

	Against the remote alone:

	EOF
	ratio_table "${wbds[@]}"
	cat <<-EOF

	Completion latency, mean / 99th percentile, µs (median of the rounds):

	EOF
	lat_table
	cat <<-EOF

	Server CPU per request, µs (wbd and nbdkit together; nbdkit's part in
	brackets):

	EOF
	cpu_split_table
	cat <<-EOF

	Threads of wbd's writeback device (flush-43:0) after each case's
	FLUSH (they also serve the read misses; the pool starts with one and
	adds one when a job has waited worker_spawn_ms, 1 s by default):

	EOF
	header configuration
	for s in "${wbds[@]}"; do row_cells WK "$s"; done
	cat <<-EOF

	Every round:

	EOF
	rounds_table
	cat <<-EOF

	Writeback step (medians of the rounds, each column on its own): what
	each write case left dirty in wbd, and the NBD FLUSH after it that wrote
	it to the remote:

	EOF
	writeback_table "${wbds[@]}"
	cat <<-EOF

	Every FLUSH after a case, s, rounds in order:

	EOF
	flush_table
	if [[ " $* " == *" wbd+remote-cold "* ]]; then
		echo
		cold_note
	fi
}

full_report() {
	cat <<-EOF
	# wbd with a remote backing device: bench/run.sh's fio cases

	- date: $RUN_DATE; took $RUN_MINUTES min
	- command: \`$RUN_CMD\`
	- load at the start: \`$LOAD_START\`
	- load at the end: \`$LOAD_END\`
	- 1-minute load average when the fio runs started: min $(printf '%s\n' "${LOADS[@]}" | sort -g | head -n1), median $(median "${LOADS[@]}"), max $(printf '%s\n' "${LOADS[@]}" | sort -g | tail -n1)
	- CPU: $(nproc) × $(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo); $(nbdkit --version); fio $(fio --version | sed 's/^fio-//')
	- wbd $WBD_VERSION ($WBD)
	- remote: \`nbdkit memory size=$SIZE\` on a Unix socket; wbd: cache.size $WBD_CACHE, page_size 4K, dirty_ratio $WBD_DIRTY_RATIO${WB_KEYS:+, $WB_KEYS}, export backing \`nbd+unix:///?socket=…\`, cache_mode writeback
	- fio: --ioengine=nbd, one job, --time_based --runtime=$RT, cases as bench/run.sh; fresh servers for every run, export filled and FLUSHed first
	$( [[ -n $SLOW_RATE ]] && echo "- slow remote: \`nbdkit --filter=rate memory size=$SLOW_SIZE rate=$SLOW_RATE burstiness=0.1\`" )

	EOF
	report "Remote: nbdkit memory ($SIZE)" "${CONFIGS[@]}"
	if [[ -n $SLOW_RATE ]]; then
		echo
		report "Slow remote: nbdkit memory ($SLOW_SIZE) behind --filter=rate rate=$SLOW_RATE" "${SLOW_CONFIGS[@]}"
	fi
	if ((${#STATUS[@]} > 0)); then
		echo
		echo "### Problems during the run"
		echo
		for s in "${STATUS[@]}"; do echo "- $s"; done
	fi
	if [[ -n $WBD_LOG_NOTES ]]; then
		printf '\n### wbd logged\n\n```\n%s\n```\n' "$WBD_LOG_NOTES"
	fi
}

# --- main -------------------------------------------------------------------------

install_deps
build_wbd
build_wbctl
HZ=$(getconf CLK_TCK)
WBD_VERSION=${BENCH_WBD_VERSION:-$(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown)}

T=$(mktemp -d "${BENCH_TMPDIR:-/var/tmp}/wbd-rfio.XXXXXX")
mkdir -p "$T/json"
((${#T} < 80)) || die "temporary directory $T is too long for Unix socket paths"
say "temporary directory $T; $RT s per case, $ROUNDS round(s); load: $LOAD_START"

ALL=("${CONFIGS[@]}")
series "${CONFIGS[@]}"
if [[ -n $SLOW_RATE ]]; then
	ALL+=("${SLOW_CONFIGS[@]}")
	series "${SLOW_CONFIGS[@]}"
fi
LOAD_END=$(uptime)

WBD_LOG_NOTES=$(cat "$T"/wbd*.log 2>/dev/null |
    grep -Ei 'warn|error|fail|fatal|abort|assert|sanitizer' | sort | uniq -c | head -n 40 || true)
RUN_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
RUN_MINUTES=$(awk -v s=$(($(date +%s) - START_EPOCH)) 'BEGIN { printf "%.1f", s / 60 }')
RUN_CMD="bash bench/remote-fio.sh${QUICK:+ --quick}${SLOW_RATE:+ --slow=$SLOW_RATE}"
[[ -n ${BENCH_RUNTIME:-} && -z $QUICK ]] && RUN_CMD="BENCH_RUNTIME=$RT $RUN_CMD"
[[ -n ${BENCH_ROUNDS:-} && -z $QUICK ]] && RUN_CMD="BENCH_ROUNDS=$ROUNDS $RUN_CMD"
[[ -n ${BENCH_SIZE:-} ]] && RUN_CMD="BENCH_SIZE=$SIZE $RUN_CMD"
[[ -n ${BENCH_SLOW_SIZE:-} && -n $SLOW_RATE ]] && RUN_CMD="BENCH_SLOW_SIZE=$SLOW_SIZE $RUN_CMD"
[[ -n $WB_KEYS ]] && RUN_CMD="BENCH_WRITEBACK_KEYS='$WB_KEYS' $RUN_CMD"

mkdir -p "$RESULTS"
cp "$T"/json/*.json "$T"/*.log "$T"/*.conf "$RESULTS"/ 2>/dev/null || true
full_report >"$RESULTS/report.md"
echo
cat "$RESULTS/report.md"
say "raw results and report.md in $RESULTS"
