#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# net/run.sh - wbd across a network link, side by side with no cache
# (issue 27).
#
#   bash bench/net/run.sh [--quick] [--profile=lan|wan]...
#
# The remote is nbdkit serving a file in the temporary directory (a tmpfs:
# its FLUSH costs nothing, so only the link is measured), behind two
# filters: bench/net/delay-filter.c, built here with gcc against
# nbdkit-plugin-dev, which adds a round trip to every request, FLUSH
# included (half before the plugin, half after), and nbdkit's rate filter
# (one bucket for the whole link, all connections together).  nbdkit runs
# with --threads 64, so a client's 32 requests are all in flight at once.
# Two profiles:
#
#   lan   rtt=0.5ms rate=10G   (nbdkit's G is 2^30 bits/s)
#   wan   rtt=5ms   rate=1G
#
# In front of that remote, four servers, each on a Unix socket:
#
#   remote        fio straight to the remote (no cache)
#   wbd           wbd, export backing = the remote's nbd+unix:// URI,
#                 cache.size BENCH_NET_CACHE, the other settings wbd's
#                 defaults (dirty_background_ratio 10, dirty_ratio 20, ...)
#   nbdkit-cache  nbdkit --filter=cache --filter=readahead nbd (the cache
#                 filter in its default writeback mode, its cache file in
#                 the temporary directory), --threads 64
#   qemu-nbd      qemu-nbd -f raw --cache=writeback on the remote's URI: a
#                 pass-through
#
# The cases, fio's nbd engine, one job, one connection:
#
#   burst-randwrite-4k      4K random writes QD32, BURST bytes (less than
#                           wbd's dirty limit), no fsync
#   sustained-randwrite-4k  the same, SIZE bytes (more than the cache)
#   fsync64-randwrite-4k    4K random writes QD32, --fsync=64, RUNTIME s.
#                           fio counts a sync as done only when it
#                           completes, so after each 64th write its nbd
#                           engine issues a FLUSH into every slot that
#                           frees until one completes: about one FLUSH
#                           for every two writes, for every server alike
#                           (libaio on a file: one for every 64)
#   commit-qd1              4K random writes QD1, --fsync=1, RUNTIME s:
#                           commits/s, and the p99 of writes and FLUSHes
#   write-1m-fsync          1M sequential writes QD8, SIZE bytes,
#                           --end_fsync=1 (fio's time includes it)
#   cold-read-1m            1M sequential reads QD8 of SIZE bytes, caches
#                           empty
#   cold-randread-4k        4K random reads QD32, RUNTIME s, caches empty
#   hot-randread-4k         4K random reads QD32 over HOT bytes, RUNTIME s,
#                           after one 1M pass over them
#   drain-randwrite-4k      DRAIN bytes of 4K random writes (every block
#                           once): for wbd, written with writeback held off
#                           (dirty_background_ratio 90, dirty_ratio 95, no
#                           periodic writeback), then `wbctl flush` timed;
#                           MiB/s of what `wbctl status` says is dirty when
#                           the flush starts; for nbdkit-cache, written,
#                           then one FLUSH timed, MiB/s of DRAIN;
#                           for the pass-throughs, fio at QD32 with
#                           --end_fsync=1 timed, MiB/s of DRAIN.
#
# Every run gets fresh processes (remote and server), so each cache starts
# empty: the remote's file is filled once with random data at the start
# (outside the link), and the write cases overwrite it.  After each write
# case one FLUSH through the server is timed (at most FLUSH_TIMEOUT s;
# not part of the figure).  The cases run on every server in turn, the
# order rotated each round; BENCH_ROUNDS rounds, the median counts.  Once
# per profile and server, fio writes VERIFY bytes with --verify=crc32c
# through the server, then a FLUSH, then the same range read from the
# remote directly must equal what the server returns.
#
# Writes the section "Across a network link" of docs/benchmarks.md (between
# its BEGIN and END markers, appended if missing; the rest of the file is
# kept), its charts (bench/charts.py) to docs/bench/net-PROFILE-*.png, and
# everything (fio JSON, logs, summary.json per profile) to
# bench/results/STAMP-net/.
#
# Options:
#   --quick            BENCH_NET_SIZE 256M, cache 128M, one round of 5 s
#                      per time-based case, 60 s cap: a check that it works
#   --profile=NAME     lan or wan; repeat for both (default both)
#
# Environment (besides bench/run.sh's WBD, WBCTL, WBD_SKIP_DEPS,
# BENCH_KEEP, BENCH_WBD_VERSION):
#   BENCH_ROUNDS        rounds (default 3; 1 with --quick)
#   BENCH_RUNTIME       seconds of each time-based case (default 20)
#   BENCH_NET_SIZE      the remote's size, and the bytes of the sustained,
#                       1M write and cold 1M read cases (default 2G)
#   BENCH_NET_CACHE     wbd's cache.size (default 1G)
#   BENCH_NET_CASES     the cases to run (default all, in the order above)
#   BENCH_NET_SERVERS   the servers (default: remote wbd wbd-journal
#                       wbd-journal-onwrite wbd-journal-ordered nbdkit-cache
#                       qemu-nbd); the wbd-journal ones are wbd with a write
#                       log (issue 28) in mode "on-flush" and "on-write",
#                       and on-flush with ordered = true
#   BENCH_NET_JOURNAL_DIR  where their logs go: a local disk (default
#                       /var/tmp; a tmpfs would make fdatasync free)
#   BENCH_NET_JOURNAL_SIZE their size (default 1G)
#   BENCH_NET_MAX_S     cap in seconds on the sized cases (default 300)
#   BENCH_NET_TMPDIR    where the temporary directory goes (default /dev/shm)
#   BENCH_NET_DOC       the Markdown file written (default docs/benchmarks.md;
#                       "-" writes none)
#   BENCH_NET_WBD_KEYS  more keys for wbd's writeback group
#   BENCH_NET_REMOTE_KEYS  keys for wbd's remote group
#   BENCH_NET_BURST     the rate filter's burstiness, in seconds of the
#                       link's rate that a client may send at once after
#                       an idle spell (default 0.1; nbdkit's own default,
#                       2, let a drain that followed an idle fill send 256
#                       MiB at memory speed over the WAN profile's 1 Gbit/s
#                       link: 246 MiB/s measured, and less the more of the
#                       bucket write-behind had spent during the fill)
set -euo pipefail

NET_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

QUICK=
PROFILES=()
while (($# > 0)); do
	case $1 in
	--quick) QUICK=1 ;;
	--profile=lan | --profile=wan) PROFILES+=("${1#--profile=}") ;;
	-h | --help) usage; exit 0 ;;
	*) echo "net/run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
((${#PROFILES[@]} > 0)) || PROFILES=(lan wan)
if [[ -n $QUICK ]]; then
	export BENCH_ROUNDS=${BENCH_ROUNDS:-1} BENCH_RUNTIME=${BENCH_RUNTIME:-5}
	NET_SIZE=${BENCH_NET_SIZE:-256M}
	NET_CACHE=${BENCH_NET_CACHE:-128M}
	MAX_S=${BENCH_NET_MAX_S:-60}
else
	export BENCH_RUNTIME=${BENCH_RUNTIME:-20}
	NET_SIZE=${BENCH_NET_SIZE:-2G}
	NET_CACHE=${BENCH_NET_CACHE:-1G}
	MAX_S=${BENCH_NET_MAX_S:-300}
fi

# bench/run.sh: RT, ROUNDS, REPO, STAMP, the EXIT trap that stops every PID
# in PIDS and removes $T, and the helpers (say, die, spawn, stop_pid,
# wait_ready, wbd_settled, median, ratio, install_deps, build_wbd, ...).
# It stops before its main part when sourced.
# shellcheck source=bench/run.sh
source "$NET_DIR/../run.sh"

ALL_NET_CASES=(burst-randwrite-4k sustained-randwrite-4k fsync64-randwrite-4k
    commit-qd1 write-1m-fsync cold-read-1m cold-randread-4k hot-randread-4k
    drain-randwrite-4k)
read -r -a NET_CASES <<<"${BENCH_NET_CASES:-${ALL_NET_CASES[*]}}"
read -r -a NET_SERVERS <<<"${BENCH_NET_SERVERS:-remote wbd wbd-journal wbd-journal-onwrite wbd-journal-ordered nbdkit-cache qemu-nbd}"
JOURNAL_DIR=${BENCH_NET_JOURNAL_DIR:-/var/tmp}
JOURNAL_SIZE=${BENCH_NET_JOURNAL_SIZE:-1G}
NET_DOC=${BENCH_NET_DOC:-$REPO/docs/benchmarks.md}
WB_KEYS=${BENCH_NET_WBD_KEYS:-}
REMOTE_KEYS=${BENCH_NET_REMOTE_KEYS:-}
RESULTS=$REPO/bench/results/$STAMP-net
FLUSH_TIMEOUT=$((MAX_S < 120 ? MAX_S : 120))
KIT_THREADS=64
NET_BURST=${BENCH_NET_BURST:-0.1}

for c in "${NET_CASES[@]}"; do
	[[ " ${ALL_NET_CASES[*]} " == *" $c "* ]] ||
	    die "unknown case $c in BENCH_NET_CASES (the cases: ${ALL_NET_CASES[*]})"
done
for s in "${NET_SERVERS[@]}"; do
	[[ " remote wbd wbd-journal wbd-journal-onwrite wbd-journal-ordered nbdkit-cache qemu-nbd " == *" $s "* ]] ||
	    die "unknown server $s in BENCH_NET_SERVERS"
done
SIZE_B=$(numfmt --from=iec "$NET_SIZE") || die "BENCH_NET_SIZE=$NET_SIZE is not a size"
CACHE_B=$(numfmt --from=iec "$NET_CACHE") || die "BENCH_NET_CACHE=$NET_CACHE is not a size"
# The burst: three quarters of wbd's default dirty limit (20% of the
# cache), in whole MiB.  The drain: the same amount.  Hot reads: a
# quarter of the cache.
BURST_B=$((CACHE_B * 15 / 100 / 1048576 * 1048576))
DRAIN_B=$BURST_B
HOT_B=$((CACHE_B / 4 / 1048576 * 1048576))
VERIFY_B=$((8 << 20))
((SIZE_B > CACHE_B)) || die "BENCH_NET_SIZE ($NET_SIZE) must exceed the cache ($NET_CACHE): the sustained case writes past it"

profile_rtt() { case $1 in lan) echo 0.5ms ;; wan) echo 5ms ;; esac; }
profile_rate() { case $1 in lan) echo 10G ;; wan) echo 1G ;; esac; }
profile_label() { echo "$(profile_rtt "$1"), $(profile_rate "$1")bit/s"; }

case_unit() { case $1 in *-1m* | drain-*) echo MiB/s ;; *) echo IOPS ;; esac; }
case_dir() { case $1 in *read*) echo read ;; *) echo write ;; esac; }
mib_of() { awk -v b="$1" 'BEGIN { printf "%g", b / 1048576 }'; }

case_label() {
	case $1 in
	burst-randwrite-4k) echo "4K randwrite QD32, burst of $(mib_of "$BURST_B") MiB, no fsync" ;;
	sustained-randwrite-4k) echo "4K randwrite QD32, $(mib_of "$SIZE_B") MiB sustained, no fsync" ;;
	fsync64-randwrite-4k) echo "4K randwrite QD32, fsync every 64" ;;
	commit-qd1) echo "4K randwrite QD1, fsync after each (commits/s)" ;;
	write-1m-fsync) echo "1M write QD8, $(mib_of "$SIZE_B") MiB + final fsync" ;;
	cold-read-1m) echo "cold 1M read QD8, $(mib_of "$SIZE_B") MiB" ;;
	cold-randread-4k) echo "cold 4K randread QD32" ;;
	hot-randread-4k) echo "hot 4K randread QD32 ($(mib_of "$HOT_B") MiB, read once before)" ;;
	drain-randwrite-4k) echo "drain $(mib_of "$DRAIN_B") MiB of 4K random dirty data" ;;
	esac
}

# net_case_args CASE: fio's options for the measured run.
net_case_args() {
	local rnd="--norandommap --randrepeat=0" cap="--runtime=$MAX_S"
	case $1 in
	burst-randwrite-4k) echo "--rw=randwrite --bs=4k --iodepth=32 --io_size=$BURST_B $rnd $cap" ;;
	sustained-randwrite-4k) echo "--rw=randwrite --bs=4k --iodepth=32 --io_size=$SIZE_B $rnd $cap" ;;
	fsync64-randwrite-4k) echo "--rw=randwrite --bs=4k --iodepth=32 --fsync=64 $rnd --time_based --runtime=$RT" ;;
	commit-qd1) echo "--rw=randwrite --bs=4k --iodepth=1 --fsync=1 $rnd --time_based --runtime=$RT" ;;
	write-1m-fsync) echo "--rw=write --bs=1m --iodepth=8 --io_size=$SIZE_B --end_fsync=1 $cap" ;;
	cold-read-1m) echo "--rw=read --bs=1m --iodepth=8 --io_size=$SIZE_B $cap" ;;
	cold-randread-4k) echo "--rw=randread --bs=4k --iodepth=32 $rnd --time_based --runtime=$RT" ;;
	hot-randread-4k) echo "--rw=randread --bs=4k --iodepth=32 --size=$HOT_B $rnd --time_based --runtime=$RT" ;;
	# Every block of the range once (fio's random map), in random order.
	drain-randwrite-4k) echo "--rw=randwrite --bs=4k --iodepth=32 --size=$DRAIN_B $cap" ;;
	esac
}

# --- the remote and the servers -------------------------------------------------

FILTER_SO=
K_PID='' F_PID='' URI='' KURI='' CTL=''

build_filter() {
	pkg-config --exists nbdkit ||
	    die "nbdkit's filter header is missing: install nbdkit-plugin-dev (scripts/install-deps.sh does)"
	FILTER_SO=$T/netdelay.so
	# shellcheck disable=SC2046  # pkg-config's flags, split
	gcc -std=c17 -O2 -Wall -Wextra -shared -fPIC $(pkg-config --cflags nbdkit) \
	    -o "$FILTER_SO" "$NET_DIR/delay-filter.c" || die "the delay filter does not build"
}

# write_net_conf FILE CASE [JOURNAL_MODE [ORDERED]]: wbd's configuration
# for one run, with a write log in JOURNAL_DIR if a mode is given
# (ordered = true if ORDERED is "ordered").
write_net_conf() {
	local keys=$WB_KEYS journal='' remote_group='' ordered=false
	[[ ${4:-} == ordered ]] && ordered=true
	[[ -n $REMOTE_KEYS ]] && remote_group="remote = { $REMOTE_KEYS };"
	[[ $2 == drain-* ]] &&
	    keys+=" dirty_background_ratio = 90; dirty_ratio = 95; dirty_writeback_centisecs = 0;"
	[[ -n ${3:-} ]] &&
	    journal="journal = { path = \"$JOURNAL_FILE\"; size = \"$JOURNAL_SIZE\"; mode = \"$3\"; ordered = $ordered; };"
	cat >"$1" <<-EOF
	# written by bench/net/run.sh
	listen = { unix = [ "$T/front.sock" ]; };
	control = { socket = "$T/ctl.sock"; };
	cache = { size = "$NET_CACHE"; };
	writeback = { $keys };
	$remote_group
	exports = (
	  { name = "disk0"; backing = "$KURI"; cache_mode = "writeback"; $journal }
	);
	EOF
}

# net_up PROFILE SERVER CASE TAG: the remote, then SERVER in front of it;
# sets K_PID, KURI, F_PID, URI, CTL.  Fails if something did not start.
net_up() {
	local p=$1 s=$2 c=$3 tag=$4 fsock=$T/front.sock
	K_PID='' F_PID='' URI='' CTL=''
	KURI="nbd+unix:///?socket=$T/remote.sock"
	spawn "$T/remote-$tag.log" nbdkit -f --threads "$KIT_THREADS" -U "$T/remote.sock" \
	    --filter="$FILTER_SO" --filter=rate file file="$T/remote.img" \
	    rtt="$(profile_rtt "$p")" rate="$(profile_rate "$p")" burstiness="$NET_BURST"
	K_PID=$SRV_PID
	wait_ready "$K_PID" "$KURI" || { STATUS+=("$tag: the remote did not start"); return 1; }
	case $s in
	remote)
		URI=$KURI
		return 0 ;;
	wbd | wbd-journal | wbd-journal-onwrite | wbd-journal-ordered)
		local mode='' ordered=''
		[[ $s == wbd-journal || $s == wbd-journal-ordered ]] && mode=on-flush
		[[ $s == wbd-journal-onwrite ]] && mode=on-write
		[[ $s == wbd-journal-ordered ]] && ordered=ordered
		rm -f "$JOURNAL_FILE"
		write_net_conf "$T/wbd-$tag.conf" "$c" "$mode" "$ordered"
		spawn "$T/wbd-$tag.log" "$WBD" -f -c "$T/wbd-$tag.conf"
		URI="nbd+unix:///disk0?socket=$fsock" CTL=$T/ctl.sock ;;
	nbdkit-cache)
		spawn "$T/$s-$tag.log" env TMPDIR="$T" nbdkit -f --threads "$KIT_THREADS" \
		    -U "$fsock" --filter=cache --filter=readahead nbd socket="$T/remote.sock"
		URI="nbd+unix:///?socket=$fsock" ;;
	qemu-nbd)
		spawn "$T/$s-$tag.log" qemu-nbd -f raw --cache=writeback --persistent \
		    --shared=16 -k "$fsock" "$KURI"
		URI="nbd+unix:///?socket=$fsock" ;;
	esac
	F_PID=$SRV_PID
	if ! wait_ready "$F_PID" "$URI"; then
		STATUS+=("$tag: $s did not start (log: $(tail -n 3 "$SRV_LOG" | tr '\n' ' '))")
		return 1
	fi
	[[ $s == wbd* ]] && wbd_settled "$CTL"
	return 0
}

# net_down TAG: stop the server (10 s after SIGTERM, then SIGKILL: wbd
# would otherwise write back, across the link, whatever a timed-out FLUSH
# left), then the remote.
net_down() {
	[[ -n $F_PID ]] && { stop_pid "$F_PID" 10 >/dev/null 2>&1 || true; }
	[[ -n $K_PID ]] && { stop_pid "$K_PID" 20 >/dev/null 2>&1 || true; }
	rm -f "$JOURNAL_FILE"
	rm -f "$T"/*.sock "$T"/ctl.sock
	K_PID='' F_PID=''
}

# timed CMD...: run CMD (at most FLUSH_TIMEOUT s); print the seconds it
# took, or fail.
timed() {
	local t0=$EPOCHREALTIME
	timeout "$FLUSH_TIMEOUT" "$@" >/dev/null 2>&1 || return 1
	awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }'
}

# flush_s: one FLUSH through $URI (at most FLUSH_TIMEOUT s); print the
# seconds from its request to its reply (nbd-flush.py's own figure, without
# Python's start), or fail.
flush_s() {
	timeout "$FLUSH_TIMEOUT" "$PY" "$REPO/bench/nbd-flush.py" "$URI" 2>/dev/null
}

# --- one run ------------------------------------------------------------------------

declare -A R_VAL R_FL R_P99W R_P99S R_P50S R_FDS R_CPU   # [profile,server,case,round]
declare -A VERIFY MC
STATUS=()

# fio_fig JSON DIR UNIT: "value iops mib_s p99_us sync_p99_us sync_p50_us"
# from fio.
fio_fig() {
	jq -er --arg d "$2" --arg u "$3" '.jobs[0] | select(.error == 0) |
	    .[$d] as $x | ($x.bw_bytes / 1048576) as $mib |
	    [(if $u == "IOPS" then $x.iops else $mib end), $x.iops, $mib,
	     (($x.clat_ns.percentile["99.000000"] // 0) / 1000),
	     ((.sync.lat_ns.percentile["99.000000"] // 0) / 1000),
	     ((.sync.lat_ns.percentile["50.000000"] // 0) / 1000)] |
	    map(tostring) | join(" ")' "$1"
}

# --- where the CPU goes ----------------------------------------------------------

CLK_TCK=$(getconf CLK_TCK)

# proc_ticks PID: the user + system time of PID, all its threads, in clock
# ticks (0 without a PID).
proc_ticks() {
	[[ -n $1 && -r /proc/$1/stat ]] || { echo 0; return 0; }
	awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"
}

# machine_ticks: "busy total" clock ticks of every CPU since boot.
machine_ticks() {
	awk '$1 == "cpu" { t = 0; for (i = 2; i <= NF; i++) t += $i;
	    print t - $5 - $6, t; exit }' /proc/stat
}

# cpu_begin / cpu_end JSON: around the measured fio run; cpu_end prints
# "front remote fio bench machine": the µs of CPU per request fio
# completed of the server in front (0 for the remote alone), of the remote
# (nbdkit and its filters) and of fio itself (its usr_cpu and sys_cpu over
# its runtime); then the cores these three kept busy over fio's runtime,
# and the cores the whole machine kept busy from fio's start to its end
# (its start and connection included).
CPU_F0=0 CPU_K0=0 CPU_M0='' CPU_T0=0
cpu_begin() {
	CPU_F0=$(proc_ticks "$F_PID") CPU_K0=$(proc_ticks "$K_PID")
	CPU_M0=$(machine_ticks) CPU_T0=$EPOCHREALTIME
}
cpu_end() {
	local f k m fio
	f=$(proc_ticks "$F_PID") k=$(proc_ticks "$K_PID") m=$(machine_ticks)
	fio=$(jq -er '.jobs[0] | [(.read.total_ios + .write.total_ios),
	    ((.usr_cpu + .sys_cpu) / 100 * .job_runtime / 1000), (.job_runtime / 1000)] |
	    map(tostring) | join(" ")' "$1") || return 1
	awk -v f0="$CPU_F0" -v f1="$f" -v k0="$CPU_K0" -v k1="$k" -v hz="$CLK_TCK" \
	    -v m0="$CPU_M0" -v m1="$m" -v t0="$CPU_T0" -v t1="$EPOCHREALTIME" -v fio="$fio" -v NCPU="$(nproc)" '
	    BEGIN {
		split(fio, x, " "); n = x[1]; fs = x[2]; rt = x[3]
		split(m0, a, " "); split(m1, b, " ")
		if (n <= 0 || rt <= 0) exit 1
		fsec = (f1 - f0) / hz; ksec = (k1 - k0) / hz
		printf "%.1f %.1f %.1f %.2f %.2f\n", fsec * 1e6 / n, ksec * 1e6 / n,
		    fs * 1e6 / n, (fsec + ksec + fs) / rt,
		    (b[2] - a[2] > 0 ? (b[1] - a[1]) / (b[2] - a[2]) : 0) * NCPU
	    }'
}

# net_run PROFILE SERVER CASE ROUND
net_run() {
	local p=$1 s=$2 c=$3 r=$4 tag="$1-$2-$3-r$4" k="$1,$2,$3,$4" out vals v f=- args
	local p99w p99s p50s dirty
	if ! net_up "$p" "$s" "$c" "$tag"; then
		net_down "$tag"
		return 0
	fi
	out=$T/json/$tag.json
	# shellcheck disable=SC2207  # the options, split
	args=($(net_case_args "$c"))
	if [[ $c == hot-* ]] &&
	   ! run_fio "$T/json/$tag-warm.json" "$URI" --rw=read --bs=1m --iodepth=8 --size="$HOT_B"; then
		STATUS+=("$tag: the warm-up pass failed")
	fi
	if [[ $c == drain-* && $s != remote && $s != qemu-nbd ]]; then
		# The dirty data first (not timed), then its writeback, timed.
		if ! run_fio "$T/json/$tag-fill.json" "$URI" "${args[@]}"; then
			STATUS+=("$tag: fio failed (see fio.log)")
			net_down "$tag"
			return 0
		fi
		# What is dirty when the drain starts: wbd says (it may have
		# written some back already); nbdkit's cache filter writes back
		# only on FLUSH.
		dirty=$DRAIN_B
		if [[ $s == wbd* ]]; then
			dirty=$("$WBCTL" -s "$CTL" --json status | jq -er .cache.dirty_bytes) || dirty=$DRAIN_B
			((dirty * 10 >= DRAIN_B * 9)) ||
			    STATUS+=("$tag: only $(mib_of "$dirty") MiB of $(mib_of "$DRAIN_B") MiB dirty when the drain started")
			v=$(timed "$WBCTL" -s "$CTL" flush) || v=''
		else
			v=$(flush_s) || v=''
		fi
		if [[ -z $v ]]; then
			STATUS+=("$tag: the drain did not end within $FLUSH_TIMEOUT s")
		else
			R_VAL[$k]=$(awk -v b="$dirty" -v t="$v" 'BEGIN { printf "%.1f", b / 1048576 / t }')
			R_FL[$k]=$v
		fi
	else
		[[ $c == drain-* ]] && args+=(--end_fsync=1)
		cpu_begin
		if ! run_fio "$out" "$URI" "${args[@]}" ||
		   ! vals=$(fio_fig "$out" "$(case_dir "$c")" "$(case_unit "$c")"); then
			STATUS+=("$tag: fio failed (see fio.log)")
			net_down "$tag"
			return 0
		fi
		R_CPU[$k]=$(cpu_end "$out") || R_CPU[$k]=''
		read -r v _ _ p99w p99s p50s <<<"$vals"
		R_P50S[$k]=$(awk -v x="$p50s" 'BEGIN { if (x > 0) printf "%.0f", x }')
		R_VAL[$k]=$(awk -v x="$v" 'BEGIN { printf "%.1f", x }')
		R_P99W[$k]=$(awk -v x="$p99w" 'BEGIN { printf "%.0f", x }')
		# No fsync in the case: no FLUSH latency.
		R_P99S[$k]=$(awk -v x="$p99s" 'BEGIN { if (x > 0) printf "%.0f", x }')
		if [[ $s == wbd-journal && $c == commit-qd1 ]]; then
			# The floor of a FLUSH through the log, measured now:
			# the disk's load changes it from minute to minute.
			R_FDS[$k]=$(fdatasync_p50)
		fi
		if [[ $(case_dir "$c") == write && $c != drain-* ]]; then
			# What the case left to write back, to the remote: one
			# NBD FLUSH, as a client sees it, on every server.
			f=$(flush_s) || f=">$FLUSH_TIMEOUT"
			R_FL[$k]=$f
		fi
	fi
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$p" "$s" "$c" "$r" "${R_VAL[$k]:-}" \
	    "${R_P99W[$k]:-}" "${R_P99S[$k]:-}" "${R_FL[$k]:-}" >>"$T/runs.tsv"
	say "$(printf '%s round %s %-12s %-22s %10s %-5s  p99 %6s us  fsync p99 %6s us  FLUSH after %s s' \
	    "$p" "$r" "$s" "$c" "${R_VAL[$k]:--}" "$(case_unit "$c")" "${R_P99W[$k]:--}" \
	    "${R_P99S[$k]:--}" "${R_FL[$k]:--}")"
	net_down "$tag"
}

# net_verify PROFILE SERVER: fio --verify=crc32c through the server, a
# FLUSH, then the range from the remote must equal the server's.
net_verify() {
	local p=$1 s=$2 tag="$1-$2-verify"
	VERIFY[$p,$s]=FAILED
	net_up "$p" "$s" verify "$tag" || { net_down "$tag"; return 0; }
	MC[$p,$s]=$(nbdinfo --can multi-conn "$URI" >/dev/null 2>&1 && echo yes || echo no)
	if ! run_fio "$T/json/$tag.json" "$URI" --rw=randwrite --bs=4k --iodepth=32 \
	    --size="$VERIFY_B" --verify=crc32c --do_verify=1 ||
	   ! fio_get "$T/json/$tag.json" read >/dev/null; then
		STATUS+=("$tag: fio --verify=crc32c failed through $s")
	elif ! "$PY" "$REPO/bench/nbd-flush.py" "$URI" >/dev/null; then
		STATUS+=("$tag: FLUSH failed")
	elif [[ $s == wbd-journal* ]] && ! "$WBCTL" -s "$CTL" flush >/dev/null; then
		# A FLUSH is answered from the write log: wbctl flush puts
		# everything on the remote.
		STATUS+=("$tag: wbctl flush failed")
	elif ! "$PY" - "$URI" "$KURI" "$VERIFY_B" <<-'PY'; then
	import hashlib, sys
	import nbd
	def digest(uri, n):
	    h = nbd.NBD()
	    h.connect_uri(uri)
	    d = hashlib.sha256()
	    for off in range(0, n, 1 << 20):
	        d.update(h.pread(min(1 << 20, n - off), off))
	    h.shutdown()
	    return d.hexdigest()
	n = int(sys.argv[3])
	sys.exit(0 if digest(sys.argv[1], n) == digest(sys.argv[2], n) else 1)
	PY
		STATUS+=("$tag: after a FLUSH the remote does not hold what $s returns")
	else
		VERIFY[$p,$s]=passed
	fi
	say "$p $s: fio verify and the remote after FLUSH: ${VERIFY[$p,$s]}; multi-conn ${MC[$p,$s]}"
	net_down "$tag"
}

declare -A MED P99W P99S P50S   # [profile,server,case]: medians of the rounds

net_profile() {
	local p=$1 r c i n=${#NET_SERVERS[@]} s k vals
	say "== profile $p: rtt $(profile_rtt "$p"), rate $(profile_rate "$p")"
	for s in "${NET_SERVERS[@]}"; do net_verify "$p" "$s"; done
	for ((r = 1; r <= ROUNDS; r++)); do
		say "== $p: round $r of $ROUNDS"
		for c in "${NET_CASES[@]}"; do
			for ((i = 0; i < n; i++)); do
				net_run "$p" "${NET_SERVERS[(i + r - 1) % n]}" "$c" "$r"
			done
		done
	done
	for s in "${NET_SERVERS[@]}"; do
		for c in "${NET_CASES[@]}"; do
			k=$p,$s,$c
			mapfile -t vals < <(net_rounds R_VAL "$k")
			((${#vals[@]} > 0)) || continue
			MED[$k]=$(median "${vals[@]}" | awk '{ printf "%.1f", $1 }')
			mapfile -t vals < <(net_rounds R_P99W "$k")
			if ((${#vals[@]} > 0)); then
				P99W[$k]=$(median "${vals[@]}" | awk '{ printf "%.0f", $1 }')
			fi
			mapfile -t vals < <(net_rounds R_P99S "$k")
			if ((${#vals[@]} > 0)); then
				P99S[$k]=$(median "${vals[@]}" | awk '{ printf "%.0f", $1 }')
			fi
			mapfile -t vals < <(net_rounds R_P50S "$k")
			if ((${#vals[@]} > 0)); then
				P50S[$k]=$(median "${vals[@]}" | awk '{ printf "%.0f", $1 }')
			fi
		done
	done
	return 0
}

# net_rounds ARRAY KEY: the values of every round that has one.
net_rounds() {
	local -n arr=$1
	local r
	for ((r = 1; r <= ROUNDS; r++)); do
		[[ -n ${arr[$2,$r]:-} ]] && echo "${arr[$2,$r]}"
	done
	return 0
}

# --- the report ----------------------------------------------------------------------

fmt() {     # a figure as the tables show it
	[[ -n $1 && $1 != - ]] || { echo -; return; }
	awk -v x="$1" 'BEGIN { if (x >= 100) printf "%.0f", x; else printf "%.1f", x }'
}

# results_table PROFILE: the median of each case on each server, and its
# ratio to the remote alone.
results_table() {
	local p=$1 s c v b
	printf '| case | unit |'
	for s in "${NET_SERVERS[@]}"; do printf ' %s |' "$s"; done
	echo
	printf '|---|---|'
	for s in "${NET_SERVERS[@]}"; do printf -- '---:|'; done
	echo
	for c in "${NET_CASES[@]}"; do
		printf '| %s | %s |' "$(case_label "$c")" "$(case_unit "$c")"
		b=${MED[$p,remote,$c]:-}
		for s in "${NET_SERVERS[@]}"; do
			v=${MED[$p,$s,$c]:-}
			if [[ $s == remote || -z $b || -z $v ]]; then
				printf ' %s |' "$(fmt "$v")"
			else
				printf ' %s (%s×) |' "$(fmt "$v")" "$(ratio "$v" "$b")"
			fi
		done
		echo
	done
}

# rounds_table PROFILE: every round's figure, the FLUSH after it in brackets.
rounds_table() {
	local p=$1 s c r cell
	printf '| case |'
	for s in "${NET_SERVERS[@]}"; do printf ' %s |' "$s"; done
	printf '\n|---|'
	for s in "${NET_SERVERS[@]}"; do printf -- '---|'; done
	echo
	for c in "${NET_CASES[@]}"; do
		printf '| %s |' "$c"
		for s in "${NET_SERVERS[@]}"; do
			cell=''
			for ((r = 1; r <= ROUNDS; r++)); do
				cell+="${cell:+, }$(fmt "${R_VAL[$p,$s,$c,$r]:-}")"
				[[ -n ${R_FL[$p,$s,$c,$r]:-} && $c != drain-* ]] && cell+=" (FLUSH ${R_FL[$p,$s,$c,$r]} s)"
			done
			printf ' %s |' "$cell"
		done
		echo
	done
}

# case_goal CASE: issue 27's goal for wbd / the remote alone.
case_goal() {
	case $1 in
	burst-randwrite-4k) echo 5 ;;
	sustained-randwrite-4k) echo 1.2 ;;
	fsync64-randwrite-4k) echo 1.5 ;;
	cold-read-1m) echo 0.9 ;;
	drain-randwrite-4k) echo 0.8 ;;
	*) echo 1.0 ;;
	esac
}

# targets_table PROFILE: issue 27's goals, met or not, and wbd against
# nbdkit's cache filter (which wbd should beat on every case).
targets_table() {
	local p=$1 c r g v q x
	echo "| case | wbd / remote | goal | result | wbd / nbdkit-cache |"
	echo "|---|---:|---:|---|---:|"
	for c in "${NET_CASES[@]}"; do
		r=$(ratio "${MED[$p,wbd,$c]:-}" "${MED[$p,remote,$c]:-}")
		g=$(case_goal "$c")
		# Judged on the ratio itself, not on its two decimals (128.1
		# against 128.6 MiB/s is 0.996, short of 1.0): shown with three
		# where two would hide the miss.
		x=$(ratio "${MED[$p,wbd,$c]:-}" "${MED[$p,remote,$c]:-}" 6)
		v=$(verdict "$x" ">=" "$g")
		[[ $v == "NOT MET" && $(verdict "$r" ">=" "$g") == MET ]] &&
		    r=$(awk -v x="$x" 'BEGIN { printf "%.3f", x }')
		q=$(ratio "${MED[$p,wbd,$c]:-}" "${MED[$p,nbdkit-cache,$c]:-}")
		printf '| %s | %s× | ≥ %s× | **%s** | %s× |\n' "$c" "$r" "$g" "$v" "$q"
	done
}

# journal_table PROFILE: issue 28's goals for wbd with a write log (on
# the WAN profile): commits at QD1 >= 10x the remote alone, fsync every 64
# >= 3x, and a FLUSH's median latency within 2x of an fdatasync of the
# same size on the log's filesystem (FDS_P50, measured at the start).
journal_table() {
	local p=$1 s c g r v
	echo "| server | case | / remote | goal | result |"
	echo "|---|---|---:|---:|---|"
	for s in wbd wbd-journal wbd-journal-onwrite wbd-journal-ordered; do
		[[ " ${NET_SERVERS[*]} " == *" $s "* ]] || continue
		for c in commit-qd1 fsync64-randwrite-4k; do
			[[ " ${NET_CASES[*]} " == *" $c "* ]] || continue
			g=10
			[[ $c == fsync64-* ]] && g=3
			r=$(ratio "${MED[$p,$s,$c]:-}" "${MED[$p,remote,$c]:-}")
			v=$(verdict "$(ratio "${MED[$p,$s,$c]:-}" "${MED[$p,remote,$c]:-}" 6)" ">=" "$g")
			[[ $s == wbd-journal ]] || v="(for comparison)"
			printf '| %s | %s | %s× | ≥ %s× | %s |\n' "$s" "$c" "$r" "$g" "$v"
		done
	done
	if [[ " ${NET_CASES[*]} " == *" commit-qd1 "* ]]; then
		# The fdatasync measured right after each round of
		# wbd-journal's commit-qd1 (the one at the start if none).
		local fds vals
		mapfile -t vals < <(net_rounds R_FDS "$p,wbd-journal,commit-qd1" | grep -v '^-$')
		fds=$FDS_P50
		((${#vals[@]} > 0)) && fds=$(median "${vals[@]}" | awk '{ printf "%.0f", $1 }')
		for s in wbd wbd-journal wbd-journal-onwrite wbd-journal-ordered; do
			[[ " ${NET_SERVERS[*]} " == *" $s "* ]] || continue
			r=$(ratio "${P50S[$p,$s,commit-qd1]:-}" "$fds")
			v=$(verdict "$(ratio "${P50S[$p,$s,commit-qd1]:-}" "$fds" 6)" "<=" 2)
			[[ $s == wbd-journal ]] || v="(for comparison)"
			printf '| %s | FLUSH p50 %s µs / fdatasync p50 %s µs | %s× | ≤ 2× | %s |\n' \
			    "$s" "${P50S[$p,$s,commit-qd1]:--}" "$fds" "$r" "$v"
		done
	fi
}

# fdatasync_p50: the median latency of a 4 KiB write and fdatasync on
# JOURNAL_DIR's filesystem (what a FLUSH through the log cannot beat).
fdatasync_p50() {
	local f=$JOURNAL_DIR/wbd-bench-fds.$$ out=$T/json/fdatasync.json
	fio --name=fds --filename="$f" --size=64M --rw=randwrite --bs=4k --iodepth=1 \
	    --ioengine=psync --fdatasync=1 --time_based --runtime=5 \
	    --output-format=json --output="$out" >/dev/null 2>&1 || { rm -f "$f"; echo -; return; }
	rm -f "$f"
	jq -er '.jobs[0].sync.lat_ns.percentile["50.000000"] / 1000 | floor' "$out" 2>/dev/null || echo -
}

latency_rows() {
	local p=$1 s c
	for c in commit-qd1 fsync64-randwrite-4k; do
		[[ " ${NET_CASES[*]} " == *" $c "* ]] || continue
		for s in "${NET_SERVERS[@]}"; do
			printf '| %s | %s | %s | %s |\n' "$c" "$s" "${P99W[$p,$s,$c]:--}" "${P99S[$p,$s,$c]:--}"
		done
	done
}

# cpu_rows PROFILE: per case and server, the median over the rounds of
# each figure cpu_end gives.
cpu_rows() {
	local p=$1 s c r i cell vals
	for c in "${NET_CASES[@]}"; do
		[[ $c == drain-* ]] && continue
		for s in "${NET_SERVERS[@]}"; do
			cell=''
			for i in 1 2 3 4 5; do
				mapfile -t vals < <(for ((r = 1; r <= ROUNDS; r++)); do
					[[ -n ${R_CPU[$p,$s,$c,$r]:-} ]] &&
					    awk -v i="$i" '{ print $i }' <<<"${R_CPU[$p,$s,$c,$r]}"
				done)
				((${#vals[@]} > 0)) || continue 2
				cell+=" $(median "${vals[@]}")"
			done
			# shellcheck disable=SC2086  # the five figures, split
			set -- $cell
			printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$c" "$s" \
			    "$([[ $s == remote ]] && echo - || echo "$1")" "$2" "$3" \
			    "$(awk -v a="$1" -v b="$2" -v c="$3" 'BEGIN { printf "%.1f", a + b + c }')" "$4" "$5"
		done
	done
}

machine_info() {
	echo "- CPU: $(nproc) × $(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo); load average at the start: $LOAD_START, at the end: $LOAD_END"
	echo "- fio $(fio --version | sed 's/^fio-//'), $(nbdkit --version), $(qemu-nbd --version | head -n 1)"
	echo "- wbd $WBD_VERSION"
}

write_section() {
	local p s
	cat <<-EOF
	## Across a network link

	Written by \`bench/net/run.sh\` (issue 27); do not edit by hand — run it
	again.  Date: $RUN_DATE; command: \`$RUN_CMD\` (took $RUN_MINUTES min).

	$(machine_info)

	The remote is \`nbdkit --threads $KIT_THREADS --filter=netdelay.so
	--filter=rate file\` on a file in a tmpfs (filled with random data
	first, outside the link): \`bench/net/delay-filter.c\` adds the round
	trip to every request, FLUSH included, half before the plugin and half
	after; nbdkit's rate filter caps the link (nbdkit's G is 2^30 bits),
	with \`burstiness=$NET_BURST\` (seconds of the rate a client may send
	at once after an idle spell; nbdkit's default, 2, let a drain after
	an idle fill go at memory speed).
	Every run starts a fresh remote and a fresh server, on Unix sockets,
	so every cache starts empty.  The servers in front of it:

	| server | what |
	|---|---|
	| remote | fio straight to the remote: no cache |
	| wbd | \`cache.size = "$NET_CACHE"\`, the writeback settings at their defaults${WB_KEYS:+ and \`$WB_KEYS\`}, backing = the remote's URI |
	| wbd-journal | the same with \`journal = { path = "$JOURNAL_DIR/..."; size = "$JOURNAL_SIZE"; mode = "on-flush"; }\`: a FLUSH is answered from the write log |
	| wbd-journal-onwrite | the same with \`mode = "on-write"\`: every write is in the log before its reply |
	| wbd-journal-ordered | wbd-journal with \`ordered = true\`: the remote receives whole FLUSH epochs only, in order, applied from the log |
	| nbdkit-cache | \`nbdkit --threads $KIT_THREADS --filter=cache --filter=readahead nbd socket=REMOTE\` (cache filter in its default writeback mode) |
	| qemu-nbd | \`qemu-nbd -f raw --cache=writeback --persistent --shared=16 nbd+unix:///?socket=REMOTE\` (a pass-through) |

	fio's nbd engine, one job, one connection; time-based cases $RT s,
	sized cases at most $MAX_S s; the median of $ROUNDS round(s), the
	servers' order rotated each round.  In brackets, the ratio to the
	remote alone.  Burst: $(mib_of "$BURST_B") MiB, under wbd's dirty limit (20% of
	$NET_CACHE).  Drain: $(mib_of "$DRAIN_B") MiB of 4K random dirty data —
	for wbd, written with writeback held off, then \`wbctl flush\` timed
	(the rate: what \`wbctl status\` gave as dirty when it started);
	for nbdkit-cache, one FLUSH timed; for the pass-throughs, fio writing
	the same pattern at QD32 with \`--end_fsync=1\`.  The 1M write's
	figure includes its final fsync (fio's time does).

	**These figures are noisy.** Everything here — fio, the servers and
	the remote's delays — shares $(nproc) cores, and other work ran on the
	machine during the run.
	EOF
	for p in "${PROFILES[@]}"; do
		cat <<-EOF

		### ${p^^} ($(profile_label "$p"))

		EOF
		results_table "$p"
		cat <<-EOF

		Every round (the FLUSH after each write case in brackets; at most
		$FLUSH_TIMEOUT s):

		EOF
		rounds_table "$p"
		cat <<-EOF

		Issue 27's goals (ratios of the medians above):

		EOF
		targets_table "$p"
		cat <<-EOF

		Issue 28's goals for the write log ($JOURNAL_SIZE in
		\`$JOURNAL_DIR\`, $(df -T "$JOURNAL_DIR" | awk 'NR == 2 { print $2 }'); an
		fdatasync of 4 KiB there took $FDS_P50 µs at the median at the start,
		and is measured again after each round of wbd-journal's commit-qd1,
		the median of which the FLUSH's latency is set against):

		EOF
		journal_table "$p"
		cat <<-EOF

		99th percentiles, µs (median of the rounds):

		| case | server | write p99 | fsync (FLUSH) p99 |
		|---|---|---:|---:|
		EOF
		latency_rows "$p"
		cat <<-EOF

		Where the CPU goes: µs of CPU per request fio completed, of the
		server in front, of the remote (nbdkit with its two filters) and of
		fio itself, and the cores those three kept busy over fio's
		runtime, beside the cores the whole machine kept busy from fio's
		start to its end (of $(nproc); median of the rounds; the drain is
		not a fio run).  When
		the three keep about $(nproc) cores busy, the case is bound by this
		machine's CPUs, not by the link: its rate is then about
		$(nproc) cores ÷ the total µs per request.

		| case | server | front µs | remote µs | fio µs | total µs | cores (these three) | cores (machine) |
		|---|---|---:|---:|---:|---:|---:|---:|
		EOF
		cpu_rows "$p"
		echo
		local checks=''
		for s in "${NET_SERVERS[@]}"; do
			checks+="${checks:+; }$s ${VERIFY[$p,$s]:-not run} (multi-conn ${MC[$p,$s]:--})"
		done
		printf 'Data check (fio --verify=crc32c of %s MiB through the server, a FLUSH, then the remote must hold what the server returns): %s.\n' \
		    "$(mib_of "$VERIFY_B")" "$checks"
		echo
		for c in "${NET_CASES[@]}"; do
			[[ -f $RESULTS/$p/bench/case-$c.png ]] &&
			    printf '![%s, %s](bench/net-%s-case-%s.png)\n' "$(case_label "$c")" "${p^^}" "$p" "$c"
		done
	done
	if ((${#STATUS[@]} > 0)); then
		echo
		echo "Problems during the run:"
		echo
		for s in "${STATUS[@]}"; do echo "- $s"; done
	fi
}

# net_summary PROFILE FILE: bench/charts.py's summary.json for PROFILE.
net_summary() {
	local p=$1 c
	{
		awk -F'\t' -v p="$p" '$1 == p && $5 != "" {
		    printf "{\"server\": \"%s\", \"case\": \"%s\", \"round\": %s, \"iops\": %s, \"mib_s\": %s}\n",
		        $2, $3, $4, $5, $5 }' "$T/runs.tsv" | jq -s . >"$T/runs.json"
		for c in "${NET_CASES[@]}"; do
			jq -n --arg n "$c" --arg l "$c, ${p^^} $(profile_label "$p")" \
			    --arg u "$(case_unit "$c")" '{name: $n, label: $l, unit: $u}'
		done | jq -s . >"$T/cases.json"
		printf '%s\n' "${NET_SERVERS[@]}" | jq -R . | jq -s . >"$T/servers.json"
		jq -n --slurpfile runs "$T/runs.json" --slurpfile cases "$T/cases.json" \
		    --slurpfile servers "$T/servers.json" --argjson rounds "$ROUNDS" --arg profile "$p" \
		    '{format: 1, profile: $profile, rounds: $rounds, servers: $servers[0],
		      cases: $cases[0], runs: $runs[0], targets: [], timelines: []}'
	} >"$2"
}

# --- main ---------------------------------------------------------------------------

install_deps
build_wbd
build_wbctl
WBD_VERSION=${BENCH_WBD_VERSION:-$(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown)}
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

T=$(mktemp -d "${BENCH_NET_TMPDIR:-/dev/shm}/wbd-net.XXXXXX")
mkdir -p "$T/json"
: >"$T/runs.tsv"
((${#T} < 80)) || die "temporary directory $T is too long for Unix socket paths"
build_filter
JOURNAL_FILE=$JOURNAL_DIR/wbd-bench-journal.$$.wal
FDS_P50=$(fdatasync_p50)
say "fdatasync of 4 KiB in $JOURNAL_DIR: $FDS_P50 us at the median"
say "filling the remote's $NET_SIZE file with random data"
head -c "$SIZE_B" /dev/urandom >"$T/remote.img"
say "temporary directory $T; profiles ${PROFILES[*]}; $ROUNDS round(s); cases ${NET_CASES[*]}"

for p in "${PROFILES[@]}"; do net_profile "$p"; done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

RUN_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
RUN_MINUTES=$(awk -v s=$(($(date +%s) - START_EPOCH)) 'BEGIN { printf "%.1f", s / 60 }')
RUN_CMD="bash bench/net/run.sh${QUICK:+ --quick}"
((${#PROFILES[@]} == 2)) || RUN_CMD+=" --profile=${PROFILES[0]}"
# The settings given in the environment (not those --quick or the
# defaults set).
for v in BENCH_NET_SIZE BENCH_NET_CACHE BENCH_NET_CASES BENCH_NET_SERVERS BENCH_NET_MAX_S BENCH_NET_WBD_KEYS BENCH_NET_REMOTE_KEYS BENCH_NET_JOURNAL_DIR BENCH_NET_JOURNAL_SIZE; do
	[[ -n ${!v:-} ]] && RUN_CMD="$v='${!v}' $RUN_CMD"
done
[[ -n $QUICK && $ROUNDS == 1 && $RT == 5 ]] || RUN_CMD="BENCH_ROUNDS=$ROUNDS BENCH_RUNTIME=$RT $RUN_CMD"

mkdir -p "$RESULTS"
cp "$T"/json/*.json "$T"/*.log "$T"/*.conf "$T/runs.tsv" "$RESULTS"/ 2>/dev/null || true
for p in "${PROFILES[@]}"; do
	mkdir -p "$RESULTS/$p"
	net_summary "$p" "$RESULTS/$p/summary.json"
	if have_matplotlib; then
		"$PY" "$REPO/bench/charts.py" "$RESULTS/$p" >"$T/charts-$p.log" 2>&1 ||
		    STATUS+=("bench/charts.py failed for $p: $(tail -n 1 "$T/charts-$p.log")")
	fi
done
write_section >"$RESULTS/section.md"

if [[ $NET_DOC != - ]]; then
	"$PY" - "$RESULTS/section.md" "$NET_DOC" <<-'PY'
	import os, sys
	new = open(sys.argv[1]).read().rstrip("\n") + "\n"
	begin = "<!-- BEGIN bench/net/run.sh: generated, replaced by its next run -->\n"
	end = "<!-- END bench/net/run.sh -->\n"
	old = open(sys.argv[2]).read() if os.path.exists(sys.argv[2]) else ""
	if begin in old and end in old:
	    head, rest = old.split(begin, 1)
	    tail = rest.split(end, 1)[1]
	else:
	    head, tail = old.rstrip("\n") + "\n\n" if old else "", ""
	open(sys.argv[2], "w").write(head + begin + new + end + tail)
	PY
	doc_charts=$(dirname "$NET_DOC")/bench
	mkdir -p "$doc_charts"
	for p in "${PROFILES[@]}"; do
		rm -f "$doc_charts/net-$p-"case-*.png
		for f in "$RESULTS/$p"/bench/case-*.png; do
			[[ -f $f ]] && cp "$f" "$doc_charts/net-$p-$(basename "$f")"
		done
	done
	say "wrote the section \"Across a network link\" of $NET_DOC"
fi

echo
cat "$RESULTS/section.md"
say "raw results in $RESULTS"
