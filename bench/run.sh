#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# run.sh - wbd side by side with other NBD servers, in one run.
#
#   bash bench/run.sh
#
# Installs what it needs (scripts/install-deps.sh, plus qemu-utils, nbdkit,
# fio and python3-matplotlib), builds wbd and wbctl in build-bench/
# (release), then starts six servers, each on a Unix socket in a temporary
# directory - wbd, nbdkit null, nbdkit memory, nbdkit file, nbdkit file with
# the cache filter in writeback mode, qemu-nbd --cache=writeback - and
# drives them with fio's nbd engine (BENCH_SERVERS may add wbd-tls: wbd
# with tls.mode "require", X.509, to see what TLS costs).  The cases
# (BENCH_CASES picks some):
#
#   burst-randwrite-4k        4 KiB random writes, queue depth 32
#   burst-write-1m            1 MiB sequential writes, queue depth 8
#   sustained-randwrite-4k    the same two with wbd writing back meanwhile
#   sustained-write-1m
#   randread-4k               4 KiB random reads, queue depth 32 (cached)
#   read-1m                   1 MiB sequential reads, queue depth 8 (cached)
#   burst-randwrite-4k-4conn  4 KiB random writes over 4 connections to
#   sustained-randwrite-4k-4conn  the export (fio numjobs=4, a connection
#                             each, queue depth 8 each: 32 in all); only
#                             on servers that advertise multi-conn
#
# The two profiles differ only in wbd's writeback thresholds, set with
# `wbctl tune` before each of its write cases (the other servers run the
# same fio job in both):
#
#   sustained  the configuration's: background writeback from 10% of the
#              2G cache (205 MiB), the periodic pass every 5 s for data
#              older than 30 s - so wbd writes back during the case;
#   burst      dirty_background_ratio 60 (1.2 GiB: more than the 1 GiB
#              export can dirty) and no data old enough to expire during
#              the case - so the writes fit under the background threshold
#              and nothing is written back until the FLUSH after the case.
#              `wbctl --json status` before and after each wbd run checks
#              that: no byte written back, no background writeback queued.
#
# Every server that stores data is first filled by one sequential pass over
# its whole export and FLUSHed, so reads return real data (for wbd, from its
# cache: the export fits in it), and each case is followed by a FLUSH so the
# next one starts clean.  Each case runs on every server in turn, and the
# whole series is repeated BENCH_ROUNDS times with the servers' order
# rotated; the median of the rounds is reported (on a small VM a single
# 10-second figure can be off by a factor of two).  During wbd's
# sustained-randwrite-4k runs, `wbctl --json status` is sampled every
# 0.25 s (dirty bytes, bytes written back) for a chart.  Then two wbd-only
# measurements:
#
#   rss        wbd's peak VmRSS with cache.size = 256M while fio writes 2 GiB
#              of 4 KiB random blocks to a 4 GiB export, writeback active;
#   writeback  the time wbd takes to write back 1 GiB of 4 KiB random dirty
#              pages (one FLUSH, periodic and background writeback off),
#              against dd writing 1 GiB sequentially to the same filesystem,
#              on a new sparse file and on an already written one.
#
# Prints the results and the targets of issue 13 (MET / NOT MET with the
# ratios) and writes them, with the machine, to docs/benchmarks.md, and
# the charts (bench/charts.py: a bar chart per case, servers side by side,
# the rounds' min..max as error bars; wbd's dirty data and writeback
# bandwidth over the sustained 4 KiB case) to docs/bench/*.png.  Raw fio
# JSON, the status samples, summary.json (every figure; bench/charts.py
# RESULTS-DIR draws the charts again from it), the charts and server logs
# are kept in bench/results/STAMP/.  Each server is started by this script
# and stopped by its PID.  With the defaults a run takes 30 to 40 minutes
# on two cores (144 fio runs of 10 s, each with a FLUSH after it).
#
# Environment:
#   BENCH_RUNTIME      seconds per fio case (default 10)
#   BENCH_ROUNDS       how many times each case runs on each server; the
#                      median counts (default 3)
#   BENCH_CASES        the cases to run, space-separated (default all, in
#                      the order above)
#   BENCH_SIZE         export size for the comparison (default 1G; less than
#                      1.2G, so that wbd's 2G cache holds it and a burst
#                      stays under the background threshold)
#   BENCH_TMPDIR       where the temporary directory (sockets, backing files)
#                      is made (default /var/tmp: a disk, not a tmpfs)
#   BENCH_DOC          the Markdown file written (default docs/benchmarks.md;
#                      "-" writes none); the charts go to bench/ beside it
#   BENCH_SERVERS      the servers to run, space-separated (default all)
#   BENCH_EXTRA        "rss writeback" (default); "" skips both
#   BENCH_RSS_TIMEOUT  cap in seconds on the 2 GiB RSS run (default 300)
#   BENCH_KEEP=1       keep the temporary directory
#   WBD                a wbd binary to use instead of building build-bench/
#   WBCTL              the wbctl to use (default: the one beside WBD)
#   BENCH_WBD_VERSION  how the report names that binary (default: git describe)
#   WBD_SKIP_DEPS=1    do not install packages (without python3-matplotlib
#                      the charts are left out)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RT=${BENCH_RUNTIME:-10}
ROUNDS=${BENCH_ROUNDS:-3}
SIZE=${BENCH_SIZE:-1G}
DOC=${BENCH_DOC:-$REPO/docs/benchmarks.md}
read -r -a SERVERS <<<"${BENCH_SERVERS:-wbd nbdkit-null nbdkit-memory nbdkit-file nbdkit-file-cache qemu-nbd}"
EXTRA=${BENCH_EXTRA-rss writeback}
RSS_TIMEOUT=${BENCH_RSS_TIMEOUT:-300}
PY=/usr/bin/python3      # python3-libnbd lives in the system interpreter
ALL_CASES=(burst-randwrite-4k burst-write-1m sustained-randwrite-4k sustained-write-1m
    randread-4k read-1m burst-randwrite-4k-4conn sustained-randwrite-4k-4conn)
read -r -a CASES <<<"${BENCH_CASES:-${ALL_CASES[*]}}"
WBD_CACHE=2G             # holds the whole export
WBD_DIRTY_RATIO=80       # so 10 s of 4 KiB random writes are not throttled
# wbd's writeback thresholds in each profile, set with `wbctl tune` before a
# write case; the configuration starts with the sustained ones (defaults).
SUSTAINED_TUNE="dirty_background_ratio=10 dirty_expire_centisecs=3000"
BURST_BG_RATIO=60        # burst: BURST_TUNE, set below
CONNS=4                  # connections of the -4conn cases
TIMELINE_CASE=sustained-randwrite-4k   # wbd's status sampled during it
TIMELINE_PERIOD=0.25
RSS_CACHE=256M
START_EPOCH=$(date +%s)
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
RESULTS=$REPO/bench/results/$STAMP

if ! [[ $RT =~ ^[0-9]+$ ]] || ((RT == 0)); then
	echo "bench: BENCH_RUNTIME must be a positive integer" >&2
	exit 2
fi
if ! [[ $ROUNDS =~ ^[0-9]+$ ]] || ((ROUNDS == 0)); then
	echo "bench: BENCH_ROUNDS must be a positive integer" >&2
	exit 2
fi
for c in "${CASES[@]}"; do
	[[ " ${ALL_CASES[*]} " == *" $c "* ]] ||
	    { echo "bench: unknown case $c in BENCH_CASES (the cases: ${ALL_CASES[*]})" >&2; exit 2; }
done
# No page dirtied during a burst case is old enough to expire before its end.
BURST_TUNE="dirty_background_ratio=$BURST_BG_RATIO dirty_expire_centisecs=$(((RT + 60) * 100))"

say() { printf 'bench: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# --- dependencies and build -------------------------------------------------

have_matplotlib() { "$PY" -c 'import matplotlib' 2>/dev/null; }

install_deps() {
	local missing=() p
	bash "$REPO/scripts/install-deps.sh"
	for p in qemu-nbd:qemu-utils nbdkit:nbdkit fio:fio jq:jq nbdinfo:libnbd-bin; do
		command -v "${p%%:*}" >/dev/null 2>&1 || missing+=("${p#*:}")
	done
	"$PY" -c 'import nbd' 2>/dev/null || missing+=(python3-libnbd)
	have_matplotlib || missing+=(python3-matplotlib)
	((${#missing[@]} == 0)) && return 0
	if [[ -n ${WBD_SKIP_DEPS:-} ]]; then
		[[ ${missing[*]} == python3-matplotlib ]] ||
		    die "missing: ${missing[*]} (WBD_SKIP_DEPS is set)"
		say "python3-matplotlib is missing and WBD_SKIP_DEPS is set: no charts"
		return 0
	fi
	local sudo=()
	((EUID == 0)) || sudo=(sudo)
	say "installing ${missing[*]}"
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
}

build_wbd() {
	if [[ -n ${WBD:-} ]]; then
		[[ -x $WBD ]] || die "WBD=$WBD is not executable"
		return 0
	fi
	local b=$REPO/build-bench
	if [[ ! -f $b/build.ninja ]]; then
		(cd "$REPO" && meson setup build-bench --buildtype=release)
	fi
	ninja -C "$b" daemon/wbd
	WBD=$b/daemon/wbd
}

build_wbctl() {
	if [[ -z ${WBCTL:-} ]]; then
		WBCTL=$(dirname "$WBD")/../client/wbctl
		[[ $WBD == "$REPO/build-bench/daemon/wbd" ]] && ninja -C "$REPO/build-bench" client/wbctl
	fi
	[[ -x $WBCTL ]] || die "no wbctl at $WBCTL (set WBCTL)"
}

# --- processes ----------------------------------------------------------------

T=
PIDS=()          # every process this script started and has not yet reaped

proc_alive() {
	local state
	[[ -r /proc/$1/stat ]] || return 1
	state=$(sed 's/^.*) \(.\).*/\1/' "/proc/$1/stat" 2>/dev/null) || return 1
	[[ -n $state && $state != Z && $state != X ]]
}

# stop_pid PID [SECONDS]: SIGTERM, wait, SIGKILL if it is still there.
# Returns the exit status (or 128+9 after SIGKILL).
stop_pid() {
	local pid=$1 secs=${2:-60} i rc=0
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < secs * 10; i++)); do
		proc_alive "$pid" || break
		sleep 0.1
	done
	if proc_alive "$pid"; then
		say "pid $pid still running ${secs}s after SIGTERM; killing it"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || rc=$?
	local p keep=()
	for p in "${PIDS[@]}"; do [[ $p == "$pid" ]] || keep+=("$p"); done
	PIDS=("${keep[@]}")
	return "$rc"
}

cleanup() {
	local rc=$? pid
	set +e
	for pid in "${PIDS[@]}"; do
		stop_pid "$pid" 20 >/dev/null 2>&1
	done
	if [[ -n $T && -d $T ]]; then
		if [[ -n ${BENCH_KEEP:-} ]]; then
			say "kept $T"
		else
			rm -rf "$T"
		fi
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# cpu_ticks PID: user + system clock ticks used so far by PID (all threads).
cpu_ticks() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
	s=${s##*) }
	# shellcheck disable=SC2086  # the fields, split
	set -- $s
	echo $((${12} + ${13}))
}

vm_kib() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null; }

# --- servers -------------------------------------------------------------------

SRV_PID=
SRV_URI=
SRV_LOG=

# write_wbd_conf FILE SOCKET BACKING SIZE CACHE_SIZE WRITEBACK_KEYS: the
# control socket is SOCKET's name with -control.sock for .sock; its
# admin group is ours, so that `wbctl tune` works without root.
write_wbd_conf() {
	local admin=
	((EUID == 0)) || admin="admin_group = \"$(id -gn)\";"
	cat >"$1" <<-EOF
	# written by bench/run.sh
	listen = { unix = [ "$2" ]; };
	control = { socket = "${2%.sock}-control.sock"; $admin };
	cache = { size = "$5"; page_size = "4K"; };
	writeback = { $6 };
	exports = (
	  { name = "disk0"; backing = "$3"; size = "$4"; cache_mode = "writeback"; }
	);
	EOF
}

# make_bench_pki: a CA and server certificate in $T/pki, the CA for the
# clients in $HOME/.pki/libnbd (HOME moves into $T).
make_bench_pki() {
	[[ -f $T/pki/server-cert.pem ]] && return
	mkdir -p "$T/pki" "$T/home/.pki/libnbd"
	printf 'cn = bench CA\nca\ncert_signing_key\n' >"$T/pki/ca.info"
	printf 'cn = localhost\ntls_www_server\nencryption_key\nsigning_key\n' \
	    >"$T/pki/server.info"
	(cd "$T/pki" &&
	    certtool --generate-privkey --outfile ca-key.pem &&
	    certtool --generate-self-signed --load-privkey ca-key.pem \
		--template ca.info --outfile ca-cert.pem &&
	    certtool --generate-privkey --outfile server-key.pem &&
	    certtool --generate-certificate --load-ca-certificate ca-cert.pem \
		--load-ca-privkey ca-key.pem --load-privkey server-key.pem \
		--template server.info --outfile server-cert.pem) >/dev/null 2>&1 ||
	    die "certtool failed (package gnutls-bin)"
	cp "$T/pki/ca-cert.pem" "$T/home/.pki/libnbd/"
	export HOME=$T/home
}

# spawn LOG CMD...: start CMD in the background; sets SRV_PID and SRV_LOG.
spawn() {
	SRV_LOG=$1
	shift
	"$@" >"$SRV_LOG" 2>&1 &
	SRV_PID=$!
	PIDS+=("$SRV_PID")
}

is_wbd_server() { [[ $1 == wbd || $1 == wbd-* ]]; }

# start_server NAME: start one server of the comparison; sets SRV_PID,
# SRV_URI, SRV_LOG.
start_server() {
	local name=$1 sock=$T/$1.sock img=$T/$1.img
	SRV_URI="nbd+unix:///?socket=$sock"
	case $name in
	wbd)
		write_wbd_conf "$T/wbd.conf" "$sock" "$img" "$SIZE" "$WBD_CACHE" \
		    "dirty_ratio = $WBD_DIRTY_RATIO;"
		spawn "$T/wbd.log" "$WBD" -f -c "$T/wbd.conf"
		SRV_URI="nbd+unix:///disk0?socket=$sock"
		;;
	wbd-tls)
		# wbd with tls.mode "require" (X.509); the clients find the CA
		# in $HOME/.pki/libnbd, libnbd's default place.
		make_bench_pki
		write_wbd_conf "$T/$name.conf" "$sock" "$img" "$SIZE" "$WBD_CACHE" \
		    "dirty_ratio = $WBD_DIRTY_RATIO;"
		echo "tls = { mode = \"require\"; certificates = \"$T/pki\"; };" \
		    >>"$T/$name.conf"
		spawn "$T/$name.log" "$WBD" -f -c "$T/$name.conf"
		SRV_URI="nbds+unix:///disk0?socket=$sock"
		;;
	nbdkit-null)
		spawn "$T/$name.log" nbdkit -f -U "$sock" null size="$SIZE" ;;
	nbdkit-memory)
		spawn "$T/$name.log" nbdkit -f -U "$sock" memory size="$SIZE" ;;
	nbdkit-file)
		truncate -s "$SIZE" "$img"
		spawn "$T/$name.log" nbdkit -f -U "$sock" file file="$img" ;;
	nbdkit-file-cache)
		# The cache filter keeps its cache in a file under $TMPDIR.
		truncate -s "$SIZE" "$img"
		spawn "$T/$name.log" env TMPDIR="$T" nbdkit -f -U "$sock" \
		    --filter=cache file file="$img" cache=writeback ;;
	qemu-nbd)
		truncate -s "$SIZE" "$img"
		spawn "$T/$name.log" qemu-nbd -f raw --cache=writeback --persistent \
		    --shared=16 -k "$sock" "$img" ;;
	*)
		die "unknown server $name" ;;
	esac
}

# wait_ready PID URI: wait (30 s at most) until the server answers.
wait_ready() {
	local i
	for ((i = 0; i < 300; i++)); do
		proc_alive "$1" || return 1
		nbdinfo --size "$2" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}

# wbd_settled CONTROL_SOCKET: wait (60 s at most) until wbd has faulted
# its cache's memory in (memory.prefault, on by default: a background
# thread at start), so that no case measures that start-up work.  Says
# how long it waited.
wbd_settled() {
	local i s
	for ((i = 0; i < 600; i++)); do
		s=$("$WBCTL" -s "$1" --json status 2>/dev/null) &&
			jq -e '(.cache.prefaulted_bytes // -1) < 0 or .cache.prefaulted_bytes >= .cache.size_bytes' <<<"$s" >/dev/null &&
			{ ((i == 0)) || say "wbd: cache memory faulted in after $((i / 10)).$((i % 10)) s"; return 0; }
		sleep 0.1
	done
	say "wbd: cache memory not faulted in after 60 s (going on)"
}

nbd_flush() { "$PY" "$REPO/bench/nbd-flush.py" "$1"; }

# --- cases -----------------------------------------------------------------------

# A case's name is [PROFILE-]LOAD[-4conn]: PROFILE burst or sustained (write
# cases), LOAD randwrite-4k, randread-4k, write-1m or read-1m (the four
# cases of bench/remote-fio.sh are plain LOADs).
case_profile() { case $1 in burst-*) echo burst ;; sustained-*) echo sustained ;; *) echo ;; esac; }
case_conns() { if [[ $1 == *-4conn ]]; then echo "$CONNS"; else echo 1; fi; }
case_load() {
	local c=${1#burst-}
	c=${c#sustained-}
	echo "${c%-4conn}"
}
case_dir() { case $1 in *read*) echo read ;; *) echo write ;; esac; }
case_unit() { case $1 in *-4k*) echo IOPS ;; *) echo MiB/s ;; esac; }

# case_qd CASE: fio's iodepth per connection.
case_qd() {
	local qd
	case $(case_load "$1") in *-4k) qd=32 ;; *) qd=8 ;; esac
	echo $((qd / $(case_conns "$1")))
}

# case_label CASE: how the report names it.
case_label() {
	local load p n l
	load=$(case_load "$1") p=$(case_profile "$1") n=$(case_conns "$1")
	case $load in
	randwrite-4k) l="4K randwrite" ;;
	randread-4k) l="4K randread" ;;
	write-1m) l="1M write" ;;
	read-1m) l="1M read" ;;
	esac
	if ((n > 1)); then
		l+=" ${n} conns × QD$(case_qd "$1")"
	else
		l+=" QD$(case_qd "$1")"
	fi
	[[ -n $p ]] && l="$p $l"
	echo "$l"
}

# run_fio OUT.json URI FIO-ARGS...
run_fio() {
	local out=$1 uri=$2
	shift 2
	(cd "$T" && fio --name=bench --ioengine=nbd --uri="$uri" --numjobs=1 \
	    --output-format=json --output="$out" "$@") >>"$T/fio.log" 2>&1
}

# case_args CASE: fio's options (after run_fio's).  With several
# connections: one job per connection (fio's nbd engine opens one per
# job), reported together.
case_args() {
	local a n
	a="--time_based --runtime=$RT --iodepth=$(case_qd "$1")"
	case $(case_load "$1") in
	randwrite-4k) a+=" --rw=randwrite --bs=4k --norandommap --randrepeat=0" ;;
	randread-4k) a+=" --rw=randread --bs=4k --norandommap --randrepeat=0" ;;
	write-1m) a+=" --rw=write --bs=1m" ;;
	read-1m) a+=" --rw=read --bs=1m" ;;
	esac
	n=$(case_conns "$1")
	((n > 1)) && a+=" --numjobs=$n --group_reporting"
	echo "$a"
}

# fio_get JSON DIR: "iops bw_bytes total_ios io_bytes", or fails if fio
# reported an error.
fio_get() {
	jq -er --arg d "$2" '.jobs[0] | select(.error == 0) | .[$d] |
	    "\(.iops) \(.bw_bytes) \(.total_ios) \(.io_bytes)"' "$1"
}

declare -A IOPS MIBS CPU_US FLUSH_S     # medians over the rounds
declare -A R_IOPS R_MIBS R_CPU          # [server,case,round]
declare -A S_PID S_URI S_CTL S_PROFILE  # the running servers
declare -A MC                           # server -> yes/no: advertises multi-conn
# wbd's state around each of its runs, from `wbctl --json status`
# [server,case,round]: dirty MiB before and after the case, MiB written
# back during it, write replies paced during it, background writeback
# queued or running at its end (1/0), connections open halfway through.
declare -A R_D0 R_D1 R_WBW R_PACED R_BG R_CONNS
UP=()            # servers that started
STATUS=()        # "server: what went wrong", for the report
BURST_RUNS=0     # wbd runs of burst cases checked
BURST_WB=()      # those during which writeback ran: "server case round"
# The sampled runs: "server case round file fio-start fio-end flush-end
# io-start io-end" (Unix times: fio started and exited, the FLUSH answered;
# fio's job ran from io-start to io-end, from its JSON).
TIMELINES=()

# server_up NAME: start a server, fill its export and FLUSH; adds it to UP.
server_up() {
	local name=$1 f
	say "== $name: starting"
	start_server "$name"
	if ! wait_ready "$SRV_PID" "$SRV_URI"; then
		STATUS+=("$name: did not start (log: $(tail -n 3 "$SRV_LOG" | tr '\n' ' '))")
		stop_pid "$SRV_PID" 20 || true
		return 0
	fi
	S_PID[$name]=$SRV_PID S_URI[$name]=$SRV_URI
	is_wbd_server "$name" && S_CTL[$name]=$T/$name-control.sock &&
		wbd_settled "${S_CTL[$name]}"
	UP+=("$name")
	if nbdinfo --can multi-conn "$SRV_URI" 2>/dev/null; then MC[$name]=yes; else MC[$name]=no; fi
	[[ $name == nbdkit-null ]] && return 0
	if ! run_fio "$T/json/$name-fill.json" "$SRV_URI" --rw=write --bs=1m --iodepth=8 ||
	   ! fio_get "$T/json/$name-fill.json" write >/dev/null; then
		STATUS+=("$name: filling the export failed")
	fi
	f=$(nbd_flush "$SRV_URI") || f=error
	say "$name: filled the $SIZE export; FLUSH $f s; multi-conn: ${MC[$name]}"
}

# --- wbd's state during a case ------------------------------------------------------

# wbd_tune NAME PROFILE: wbd NAME's writeback thresholds for PROFILE (burst
# or sustained), unless they are set already.
wbd_tune() {
	local name=$1 p=$2 kv
	[[ ${S_PROFILE[$name]:-sustained} == "$p" ]] && return 0
	if [[ $p == burst ]]; then kv=$BURST_TUNE; else kv=$SUSTAINED_TUNE; fi
	# shellcheck disable=SC2086
	"$WBCTL" -s "${S_CTL[$name]}" tune $kv >/dev/null || return 1
	S_PROFILE[$name]=$p
}

# wbd_snap NAME: "dirty writeback written paced background connections"
# from `wbctl --json status` of wbd NAME: the cache's dirty and
# under-writeback bytes, the bytes written back since start (all devices),
# the write replies paced since start, whether background writeback is
# queued or running (1/0), the open NBD connections.
wbd_snap() {
	"$WBCTL" -s "${S_CTL[$1]}" --json status | jq -er '[.cache.dirty_bytes,
	    .cache.writeback_bytes, ([.devices[].written_bytes] | add // 0),
	    .requests.paced_writes,
	    (if [.devices[].queued.background] | any then 1 else 0 end),
	    ([.exports[].connections] | add // 0)] | @tsv'
}

# sampler CTL FILE: `wbctl --json status` every TIMELINE_PERIOD s into FILE,
# one line each, {"t": UNIX-TIME, "status": {...}}, until killed.
sampler() {
	local s t
	while :; do
		t=$EPOCHREALTIME
		s=$("$WBCTL" -s "$1" --json status 2>/dev/null) || s=null
		printf '{"t": %s, "status": %s}\n' "$t" "${s//$'\n'/}"
		sleep "$TIMELINE_PERIOD"
	done >"$2"
}

mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

# wbd_record NAME CASE ROUND BEFORE AFTER: R_D0 ... R_BG from two
# wbd_snap lines; a burst case during which writeback ran goes to BURST_WB.
wbd_record() {
	local k=$1,$2,$3 d0 wr0 p0 d1 w1 wr1 p1 bg1
	read -r d0 _ wr0 p0 _ _ <<<"$4"
	read -r d1 w1 wr1 p1 bg1 _ <<<"$5"
	R_D0[$k]=$(mib "$d0") R_D1[$k]=$(mib "$d1") R_WBW[$k]=$(mib $((wr1 - wr0)))
	R_PACED[$k]=$((p1 - p0)) R_BG[$k]=$bg1
	[[ $(case_profile "$2") == burst ]] || return 0
	BURST_RUNS=$((BURST_RUNS + 1))
	if ((wr1 > wr0 || w1 > 0 || bg1)); then
		BURST_WB+=("$1 $2 round $3")
		STATUS+=("$1: writeback ran during $2, round $3 ($(mib $((wr1 - wr0))) MiB written back, $(mib "$w1") MiB under writeback at the end, background queued: $bg1)")
	fi
}

# --- running the cases ----------------------------------------------------------------

# run_case NAME CASE ROUND: one fio run, then a FLUSH.  For wbd, the
# profile's thresholds first, its status before and after, and during
# TIMELINE_CASE its status sampled until the FLUSH is done.
run_case() {
	local name=$1 c=$2 r=$3 pid=${S_PID[$1]} uri=${S_URI[$1]} out t0 t1 vals iops bw ios f
	local prof wbd=0 s0='' s1='' sampler='' probe='' tl='' ts0 ts1 ok=1 io
	if ! proc_alive "$pid"; then
		STATUS+=("$name: server no longer running at $c, round $r")
		return 0
	fi
	if (($(case_conns "$c") > 1)) && [[ ${MC[$name]} != yes ]]; then
		((r > 1)) || say "$name does not advertise multi-conn: no $c"
		return 0
	fi
	prof=$(case_profile "$c")
	if is_wbd_server "$name"; then
		wbd=1
		if [[ -n $prof ]] && ! wbd_tune "$name" "$prof"; then
			STATUS+=("$name: wbctl tune for the $prof profile failed: no $c in round $r")
			return 0
		fi
		s0=$(wbd_snap "$name") || s0=''
		if [[ $name == wbd && $c == "$TIMELINE_CASE" ]]; then
			tl=timeline-$name-$c-r$r.jsonl
			sampler "${S_CTL[$name]}" "$T/json/$tl" &
			sampler=$!
			PIDS+=("$sampler")
			sleep 0.5
		fi
		if (($(case_conns "$c") > 1)); then
			# Halfway through the case (fio takes a second or so to
			# start): how many connections wbd has.
			(sleep "$(awk -v t="$RT" 'BEGIN { print t / 2 + 1 }')"
			 wbd_snap "$name" | cut -f6 >"$T/conns") &
			probe=$!
			PIDS+=("$probe")
		fi
	fi
	out=$T/json/$name-$c-r$r.json
	ts0=$EPOCHREALTIME
	t0=$(cpu_ticks "$pid")
	# shellcheck disable=SC2046
	if ! run_fio "$out" "$uri" $(case_args "$c") ||
	   ! vals=$(fio_get "$out" "$(case_dir "$c")"); then
		STATUS+=("$name: fio $c failed in round $r (see fio.log)")
		ok=0
	fi
	t1=$(cpu_ticks "$pid")
	ts1=$EPOCHREALTIME
	((wbd)) && { s1=$(wbd_snap "$name") || s1=''; }
	if [[ -n $probe ]]; then
		stop_pid "$probe" 5 || true
		R_CONNS[$name,$c,$r]=$(cat "$T/conns" 2>/dev/null || echo -)
		rm -f "$T/conns"
	fi
	f=$(nbd_flush "$uri") || f=error
	if [[ -n $sampler ]]; then
		# fio's JSON: timestamp_ms is when it reported, as its job ended.
		io='- -'
		if ((ok)); then
			io=$(jq -r '"\(.timestamp_ms / 1000 - .jobs[0].job_runtime / 1000) \(.timestamp_ms / 1000)"' "$out") || io='- -'
		fi
		TIMELINES+=("$name $c $r $tl $ts0 $ts1 $EPOCHREALTIME $io")
		sleep 0.5
		stop_pid "$sampler" 5 || true
	fi
	((ok)) || return 0
	FLUSH_S[$name,$c]="${FLUSH_S[$name,$c]:+${FLUSH_S[$name,$c]}, }$f"
	read -r iops bw ios _ <<<"$vals"
	R_IOPS[$name,$c,$r]=$(awk -v x="$iops" 'BEGIN { printf "%.0f", x }')
	R_MIBS[$name,$c,$r]=$(awk -v x="$bw" 'BEGIN { printf "%.1f", x / 1048576 }')
	R_CPU[$name,$c,$r]=$(awk -v t=$((t1 - t0)) -v hz="$HZ" -v n="$ios" \
	    'BEGIN { if (n > 0) printf "%.1f", t / hz * 1e6 / n; else print "-" }')
	local extra=''
	if ((wbd)) && [[ -n $s0 && -n $s1 ]]; then
		wbd_record "$name" "$c" "$r" "$s0" "$s1"
		extra=$(printf '  dirty %s -> %s MiB, written back %s MiB' \
		    "${R_D0[$name,$c,$r]}" "${R_D1[$name,$c,$r]}" "${R_WBW[$name,$c,$r]}")
		[[ -n ${R_CONNS[$name,$c,$r]:-} ]] && extra+=", ${R_CONNS[$name,$c,$r]} connections"
	elif ((wbd)); then
		STATUS+=("$name: wbctl status failed around $c, round $r")
	fi
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$c" "$r" \
	    "${R_IOPS[$name,$c,$r]}" "${R_MIBS[$name,$c,$r]}" "${R_CPU[$name,$c,$r]}" "$f" \
	    "${R_D0[$name,$c,$r]:-}" "${R_D1[$name,$c,$r]:-}" "${R_WBW[$name,$c,$r]:-}" \
	    "${R_PACED[$name,$c,$r]:-}" "${R_BG[$name,$c,$r]:-}" "${R_CONNS[$name,$c,$r]:-}" >>"$T/runs.tsv"
	say "$(printf 'round %s %-17s %-28s %8s IOPS %8s MiB/s  server CPU %6s us/req  FLUSH %s s%s' \
	    "$r" "$name" "$c" "${R_IOPS[$name,$c,$r]}" "${R_MIBS[$name,$c,$r]}" "${R_CPU[$name,$c,$r]}" "$f" "$extra")"
}

server_down() {
	local name=$1 rc=0
	stop_pid "${S_PID[$name]}" 120 || rc=$?
	((rc == 0)) || STATUS+=("$name: exited with status $rc on SIGTERM")
	rm -f "$T/$name.img"
}

# median VALUES...: the median of the numbers given ("-" if none).
median() {
	(($# > 0)) || { echo -; return; }
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
	    END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m }'
}

# round_values ARRAY SERVER CASE: the values of every round that has one.
round_values() {
	local -n arr=$1
	local r
	for ((r = 1; r <= ROUNDS; r++)); do
		[[ -n ${arr[$2,$3,$r]:-} && ${arr[$2,$3,$r]} != - ]] && echo "${arr[$2,$3,$r]}"
	done
	return 0
}

# bench_compare: start every server, then run each case on each server in
# turn, ROUNDS times, the order of the servers rotating each round, so that
# the figures compared were taken close together in time.
bench_compare() {
	local s c r i n
	for s in "${SERVERS[@]}"; do
		server_up "$s"
	done
	n=${#UP[@]}
	for ((r = 1; r <= ROUNDS; r++)); do
		say "== round $r of $ROUNDS"
		for c in "${CASES[@]}"; do
			for ((i = 0; i < n; i++)); do
				run_case "${UP[(i + r - 1) % n]}" "$c" "$r"
			done
		done
	done
	for s in "${UP[@]}"; do
		server_down "$s"
	done
	compute_medians
}

# compute_medians: IOPS, MIBS and CPU_US of every server and case, the
# median of the rounds in R_IOPS, R_MIBS and R_CPU.
compute_medians() {
	local s c v
	for s in "${SERVERS[@]}"; do
		for c in "${CASES[@]}"; do
			mapfile -t v < <(round_values R_IOPS "$s" "$c")
			((${#v[@]} > 0)) || continue
			IOPS[$s,$c]=$(median "${v[@]}" | awk '{ printf "%.0f", $1 }')
			mapfile -t v < <(round_values R_MIBS "$s" "$c")
			MIBS[$s,$c]=$(median "${v[@]}" | awk '{ printf "%.1f", $1 }')
			mapfile -t v < <(round_values R_CPU "$s" "$c")
			CPU_US[$s,$c]=$(median "${v[@]}" | awk '$1 != "-" { printf "%.1f", $1 }')
		done
	done
}

# --- wbd only: RSS under a 2 GiB random-write run ------------------------------------

RSS_MAX_KIB='' RSS_HWM_KIB='' RSS_WRITTEN='' RSS_SECS=''

bench_rss() {
	local sock=$T/rss.sock uri sampler vals t0 t1 max_file=$T/rss.max
	say "== rss: cache.size = $RSS_CACHE, 2 GiB of 4 KiB random writes to a 4 GiB export"
	write_wbd_conf "$T/rss.conf" "$sock" "$T/rss.img" 4G "$RSS_CACHE" ""
	spawn "$T/wbd-rss.log" "$WBD" -f -c "$T/rss.conf"
	uri="nbd+unix:///disk0?socket=$sock"
	if ! wait_ready "$SRV_PID" "$uri"; then
		STATUS+=("rss: wbd did not start")
		stop_pid "$SRV_PID" 20 || true
		return 0
	fi
	wbd_settled "${sock%.sock}-control.sock"
	local pid=$SRV_PID
	(
		max=0
		while kib=$(vm_kib "$pid" VmRSS) && [[ -n $kib ]]; do
			((kib > max)) && { max=$kib; echo "$max" >"$max_file"; }
			sleep 0.2
		done
	) &
	sampler=$!
	PIDS+=("$sampler")
	t0=$(date +%s.%N)
	if ! run_fio "$T/json/rss.json" "$uri" --rw=randwrite --bs=4k --iodepth=32 \
	    --io_size=2g --norandommap --randrepeat=0 --runtime="$RSS_TIMEOUT" ||
	   ! vals=$(fio_get "$T/json/rss.json" write); then
		STATUS+=("rss: fio failed")
	fi
	t1=$(date +%s.%N)
	RSS_HWM_KIB=$(vm_kib "$pid" VmHWM)
	sleep 0.3
	stop_pid "$sampler" 5 || true
	RSS_MAX_KIB=$(cat "$max_file" 2>/dev/null || echo "")
	RSS_SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	[[ -n ${vals:-} ]] && RSS_WRITTEN=$(awk -v x="$(cut -d' ' -f4 <<<"$vals")" 'BEGIN { printf "%.0f", x / 1048576 }')
	say "rss: max VmRSS ${RSS_MAX_KIB:-?} KiB, VmHWM ${RSS_HWM_KIB:-?} KiB, ${RSS_WRITTEN:-?} MiB written in $RSS_SECS s"
	local rc=0
	stop_pid "$pid" 120 || rc=$?
	((rc == 0)) || STATUS+=("rss: wbd exited with status $rc on SIGTERM")
	rm -f "$T/rss.img"
}

# --- wbd only: writing back 1 GiB of random dirty pages ----------------------------

# Two setups, each timed against dd writing 1 GiB sequentially in the same
# directory (three dd runs, the median counts):
#   sparse  wbd creates a fresh sparse backing file, so writeback allocates
#           its blocks; dd writes a new file.
#   prealloc the backing file is written once beforehand, so writeback
#           overwrites allocated blocks; dd overwrites a file in place.
declare -A WB_FLUSH_S WB_FILL_S WB_DD_S WB_DD_ALL WB_ALLOC_MIB

# dd_new / dd_over FILE: seconds for dd to write 1 GiB (new file / in place).
dd_time() {
	local t0 t1
	sync
	sleep 1
	t0=$(date +%s.%N)
	dd if=/dev/zero of="$1" bs=1M count=1024 conv="$2" status=none
	t1=$(date +%s.%N)
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }'
}

dd_new() { rm -f "$T/dd.img"; dd_time "$T/dd.img" fdatasync; rm -f "$T/dd.img"; }
dd_over() { dd_time "$1" fdatasync,notrunc; }

# wb_flush_time SETUP BACKING: start wbd on BACKING (1G), dirty every 4 KiB
# block once in random order with writeback held off, then time one FLUSH.
wb_flush_time() {
	local setup=$1 img=$2 sock=$T/wb.sock uri t0 t1 pid rc=0
	write_wbd_conf "$T/wb-$setup.conf" "$sock" "$img" 1G 2G \
	    "dirty_background_ratio = 90; dirty_ratio = 95; dirty_writeback_centisecs = 0;"
	spawn "$T/wbd-writeback-$setup.log" "$WBD" -f -c "$T/wb-$setup.conf"
	uri="nbd+unix:///disk0?socket=$sock"
	pid=$SRV_PID
	if ! wait_ready "$pid" "$uri"; then
		STATUS+=("writeback ($setup): wbd did not start")
		stop_pid "$pid" 20 || true
		return 0
	fi
	wbd_settled "${sock%.sock}-control.sock"
	t0=$(date +%s.%N)
	# With fio's random map every 4 KiB block of the export is written once.
	if ! run_fio "$T/json/writeback-$setup-fill.json" "$uri" --rw=randwrite \
	    --bs=4k --iodepth=32 --randrepeat=0 ||
	   ! fio_get "$T/json/writeback-$setup-fill.json" write >/dev/null; then
		STATUS+=("writeback ($setup): random fill failed")
	fi
	t1=$(date +%s.%N)
	WB_FILL_S[$setup]=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	sync
	WB_FLUSH_S[$setup]=$(nbd_flush "$uri") ||
	    { WB_FLUSH_S[$setup]=''; STATUS+=("writeback ($setup): FLUSH failed"); }
	WB_ALLOC_MIB[$setup]=$(($(du -k "$img" | cut -f1) / 1024))
	say "writeback ($setup): random fill ${WB_FILL_S[$setup]} s; FLUSH ${WB_FLUSH_S[$setup]:-failed} s; backing holds ${WB_ALLOC_MIB[$setup]} MiB"
	stop_pid "$pid" 120 || rc=$?
	((rc == 0)) || STATUS+=("writeback ($setup): wbd exited with status $rc on SIGTERM")
}

median3() { printf '%s\n' "$@" | sort -n | sed -n 2p; }

bench_writeback() {
	local a b c
	say "== writeback: 1 GiB of 4 KiB random dirty pages, one FLUSH, vs dd"
	a=$(dd_new) b=$(dd_new) c=$(dd_new)
	WB_DD_ALL[sparse]="$a, $b, $c"
	WB_DD_S[sparse]=$(median3 "$a" "$b" "$c")
	say "writeback (sparse): dd to a new file: ${WB_DD_ALL[sparse]} s"
	rm -f "$T/wb.img"
	sync
	sleep 1
	wb_flush_time sparse "$T/wb.img"
	rm -f "$T/wb.img"

	dd if=/dev/zero of="$T/wb.img" bs=1M count=1024 conv=fdatasync status=none
	a=$(dd_over "$T/wb.img") b=$(dd_over "$T/wb.img") c=$(dd_over "$T/wb.img")
	WB_DD_ALL[prealloc]="$a, $b, $c"
	WB_DD_S[prealloc]=$(median3 "$a" "$b" "$c")
	say "writeback (prealloc): dd over the file: ${WB_DD_ALL[prealloc]} s"
	sync
	sleep 1
	wb_flush_time prealloc "$T/wb.img"
	rm -f "$T/wb.img"
}

# --- report ------------------------------------------------------------------------

# ratio A B [DECIMALS]: A/B to DECIMALS decimals (two by default), or "-".
# Tables show two; a goal is judged on six, where two could round a miss up.
ratio() {
	[[ -n $1 && -n $2 && $1 != - && $2 != - ]] || { echo -; return; }
	awk -v a="$1" -v b="$2" -v f="%.${3:-2}f" 'BEGIN { if (b > 0) printf f, a / b; else print "-" }'
}

# verdict VALUE OP LIMIT: MET or NOT MET (or "NOT MEASURED").
verdict() {
	[[ -n $1 && $1 != - ]] || { echo "NOT MEASURED"; return; }
	awk -v v="$1" -v l="$3" -v op="$2" 'BEGIN {
		ok = (op == ">=") ? (v >= l) : (v <= l)
		print ok ? "MET" : "NOT MET" }'
}

# The cells of the tables: CELL-FUNCTION SERVER CASE.
fig() {     # the headline figure of a case: the median IOPS or MiB/s
	case $(case_unit "$2") in
	IOPS) echo "${IOPS[$1,$2]:--}" ;;
	*) echo "${MIBS[$1,$2]:--}" ;;
	esac
}
cell_cpu() { echo "${CPU_US[$1,$2]:--}"; }
cell_flush() { echo "${FLUSH_S[$1,$2]:--}"; }
cell_rounds() {     # the figure of every round, in order
	case $(case_unit "$2") in
	IOPS) round_cells R_IOPS "$1" "$2" ;;
	*) round_cells R_MIBS "$1" "$2" ;;
	esac
}

# round_cells ARRAY SERVER CASE: every round's value, comma-separated.
round_cells() {
	local -n arr=$1
	local r cell=''
	for ((r = 1; r <= ROUNDS; r++)); do cell+="${cell:+, }${arr[$2,$3,$r]:--}"; done
	echo "$cell"
}

has_server() { [[ " ${SERVERS[*]} " == *" $1 "* ]]; }

# by_case CELL-FUNCTION [RATIO-COLUMN]: a Markdown table, a row per case and
# a column per server; with RATIO-COLUMN, a last column wbd / nbdkit-memory
# of the cells (when both servers ran).
by_case() {
	local fn=$1 s c ratio_col=''
	[[ -n ${2:-} ]] && has_server wbd && has_server nbdkit-memory && ratio_col=1
	printf '| case |'
	for s in "${SERVERS[@]}"; do printf ' %s |' "$s"; done
	[[ -n $ratio_col ]] && printf ' wbd / nbdkit-memory |'
	printf '\n|---|'
	for s in "${SERVERS[@]}"; do printf -- '---:|'; done
	[[ -n $ratio_col ]] && printf -- '---:|'
	echo
	for c in "${CASES[@]}"; do
		printf '| %s |' "$(case_label "$c")"
		for s in "${SERVERS[@]}"; do printf ' %s |' "$("$fn" "$s" "$c")"; done
		[[ -n $ratio_col ]] && printf ' %s× |' "$(ratio "$("$fn" wbd "$c")" "$("$fn" nbdkit-memory "$c")")"
		echo
	done
}

# by_server CELL-FUNCTION: a row per server, a column per case (the layout
# of bench/remote-fio.sh's tables).
by_server() {
	local fn=$1 s c
	printf '| server |'
	for c in "${CASES[@]}"; do printf ' %s (%s) |' "$(case_label "$c")" "$(case_unit "$c")"; done
	printf '\n|---|'
	for c in "${CASES[@]}"; do printf -- '---:|'; done
	echo
	for s in "${SERVERS[@]}"; do
		printf '| %s |' "$s"
		for c in "${CASES[@]}"; do printf ' %s |' "$("$fn" "$s" "$c")"; done
		echo
	done
}

# bench/remote-fio.sh's tables.
results_table() { by_server fig; }
rounds_table() { by_server cell_rounds; }
flush_table() { by_server cell_flush; }

# wbd_table: wbd's state around each write case, every round.
wbd_table() {
	local s c a
	echo "| server | case | dirty before (MiB) | dirty after (MiB) | written back during the case (MiB) | background writeback at the end | write replies paced | connections halfway |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|"
	for s in "${SERVERS[@]}"; do
		is_wbd_server "$s" || continue
		for c in "${CASES[@]}"; do
			[[ $(case_dir "$c") == write ]] || continue
			printf '| %s | %s |' "$s" "$(case_label "$c")"
			for a in R_D0 R_D1 R_WBW R_BG R_PACED R_CONNS; do
				printf ' %s |' "$(round_cells "$a" "$s" "$c")"
			done
			echo
		done
	done
}

# burst_check: one sentence on whether the burst cases stayed under the
# background threshold.
burst_check() {
	if ((BURST_RUNS == 0)); then
		echo "no wbd run of a burst case was checked"
	elif ((${#BURST_WB[@]} == 0)); then
		echo "held: in all $BURST_RUNS wbd runs of burst cases, wbd wrote back nothing during the case and had no background writeback queued at its end"
	else
		echo "NOT held: writeback ran during ${#BURST_WB[@]} of $BURST_RUNS wbd runs of burst cases (${BURST_WB[*]})"
	fi
}

TARGET_ROWS=()
SUMMARY=()
TARGETS_TSV=()

# target LABEL DETAIL VALUE OP LIMIT GOAL-TEXT [CASE KIND]: a target of
# issue 13 (OP "" for a figure given for information, no verdict).
target() {
	local v goal="goal $6"
	if [[ -n $4 ]]; then v=$(verdict "$3" "$4" "$5"); else v=INFO goal=$6; fi
	TARGET_ROWS+=("| $1 | $2 | $6 | **$v** |")
	SUMMARY+=("$(printf '%-12s %s: %s (%s)' "$v" "$1" "$2" "$goal")")
	TARGETS_TSV+=("$1	$2	$3	$4	$5	$6	$v	${7:-}	${8:-}")
}

opsym() { case $1 in ">=") echo "≥" ;; "<=") echo "≤" ;; esac; }

# vs_memory LABEL CASE OP LIMIT: a throughput target, wbd / nbdkit memory
# (OP "": for information).
vs_memory() {
	local r a b goal
	a=$(fig wbd "$2") b=$(fig nbdkit-memory "$2")
	r=$(ratio "$a" "$b")
	goal="$(opsym "$3") ${4}× nbdkit memory"
	[[ -n $3 ]] || goal="for information"
	target "$1" "$a / $b $(case_unit "$2") = ${r}×" "$r" "$3" "$4" "$goal" "$2" throughput
}

# cpu_vs_memory LABEL CASE OP LIMIT: server CPU per request, the same way.
cpu_vs_memory() {
	local r a b
	a=$(cell_cpu wbd "$2") b=$(cell_cpu nbdkit-memory "$2")
	r=$(ratio "$a" "$b")
	target "$1" "$a / $b µs = ${r}×" "$r" "$3" "$4" "$(opsym "$3") ${4}× nbdkit memory's" "$2" cpu
}

compute_targets() {
	local r
	vs_memory "burst 4K randwrite" burst-randwrite-4k ">=" 1.0
	vs_memory "burst 1M write" burst-write-1m ">=" 1.0
	vs_memory "sustained 4K randwrite" sustained-randwrite-4k ">=" 0.9
	vs_memory "sustained 1M write" sustained-write-1m ">=" 0.8
	vs_memory "1M read (cached)" read-1m ">=" 1.0
	vs_memory "4K randread (cached)" randread-4k ">=" 1.3
	cpu_vs_memory "server CPU per 4K write (sustained)" sustained-randwrite-4k "<=" 1.0
	cpu_vs_memory "server CPU per 1M write (sustained)" sustained-write-1m "<=" 1.2
	r=$(ratio "${WB_FLUSH_S[sparse]:-}" "${WB_DD_S[sparse]:-}")
	target "writeback of 1 GiB of 4K random dirty pages / dd 1 GiB, new sparse file" \
	    "${WB_FLUSH_S[sparse]:--} s / ${WB_DD_S[sparse]:--} s = ${r}×" "$r" "<=" 1.2 "≤ 1.2× dd" "" writeback
	r=$(ratio "${WB_FLUSH_S[prealloc]:-}" "${WB_DD_S[prealloc]:-}")
	target "the same over an already written file" \
	    "${WB_FLUSH_S[prealloc]:--} s / ${WB_DD_S[prealloc]:--} s = ${r}×" "$r" "<=" 1.2 "≤ 1.2× dd" "" writeback
	vs_memory "4 connections: burst 4K randwrite" burst-randwrite-4k-4conn ">=" 1.0
	vs_memory "4 connections: sustained 4K randwrite" sustained-randwrite-4k-4conn "" 1.0
	# Not a target of issue 13: issue 3's bound on memory.
	if [[ $EXTRA == *rss* ]]; then
		local max_mib hwm_mib limit_mib
		limit_mib=$(awk 'BEGIN { printf "%.1f", 256 * 1.05 + 32 }')
		max_mib=$([[ -n $RSS_MAX_KIB ]] && awk -v k="$RSS_MAX_KIB" 'BEGIN { printf "%.1f", k / 1024 }' || echo -)
		hwm_mib=$([[ -n $RSS_HWM_KIB ]] && awk -v k="$RSS_HWM_KIB" 'BEGIN { printf "%.1f", k / 1024 }' || echo -)
		target "(issue 3) wbd max VmRSS, cache.size = 256M, 2 GiB 4K random writes" \
		    "$max_mib MiB sampled (VmHWM $hwm_mib MiB)" "$max_mib" "<=" "$limit_mib" \
		    "≤ $limit_mib MiB (256 MiB + 5% + 32 MiB)" "" rss
	fi
}

# --- summary.json: every figure of the run, for bench/charts.py -------------------

# tsv_json FIELD...: stdin's tab-separated lines as a JSON list of objects
# with these member names; fields that look like numbers become numbers,
# empty ones and "-" null.
tsv_json() {
	jq -Rn --args '[inputs | split("\t") as $f |
	    [range($ARGS.positional | length) as $i |
	     {($ARGS.positional[$i]): ($f[$i] // "" |
	         if . == "" or . == "-" then null else (tonumber? // .) end)}] | add]' "$@"
}

write_summary() {
	local cases servers up tl targets runs mc s c
	cases=$(for c in "${CASES[@]}"; do
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$(case_label "$c")" "$(case_unit "$c")" \
		    "$(case_profile "$c")" "$(case_conns "$c")" "$(case_dir "$c")" "$(case_args "$c")"
	done | tsv_json name label unit profile connections direction fio)
	servers=$(printf '%s\n' "${SERVERS[@]}" | jq -R . | jq -s .)
	up=$(printf '%s\n' "${UP[@]}" | jq -R 'select(. != "")' | jq -s .)
	mc=$(for s in "${UP[@]}"; do printf '%s\t%s\n' "$s" "${MC[$s]}"; done |
	    jq -Rn '[inputs | split("\t") | {(.[0]): (.[1] == "yes")}] | add // {}')
	tl=$(for s in "${TIMELINES[@]}"; do printf '%s\n' "$s" | tr ' ' '\t'; done |
	    tsv_json server case round file fio_start fio_end flush_end io_start io_end)
	targets=$(for s in "${TARGETS_TSV[@]}"; do printf '%s\n' "$s"; done |
	    tsv_json target measured value op limit goal result case kind)
	runs=$(tsv_json server case round iops mib_s cpu_us_per_req \
	    flush_s wbd_dirty_before_mib wbd_dirty_after_mib wbd_written_back_mib \
	    wbd_paced_writes wbd_background_at_end wbd_connections <"$T/runs.tsv")
	jq -n --arg date "$RUN_DATE" --arg command "$RUN_CMD" --arg minutes "$RUN_MINUTES" \
	    --argjson runtime "$RT" --argjson rounds "$ROUNDS" --arg size "$SIZE" \
	    --arg wbd_version "$WBD_VERSION" --arg wbd_cache "$WBD_CACHE" \
	    --arg burst "$BURST_TUNE" --arg sustained "$SUSTAINED_TUNE" \
	    --arg burst_check "$(burst_check)" --arg timeline_case "$TIMELINE_CASE" \
	    --argjson servers "$servers" --argjson up "$up" --argjson multi_conn "$mc" \
	    --argjson cases "$cases" --argjson runs "$runs" --argjson timelines "$tl" \
	    --argjson targets "$targets" \
	    --arg wb "$(for s in sparse prealloc; do printf '%s\t%s\t%s\t%s\t%s\n' "$s" \
		"${WB_FILL_S[$s]:-}" "${WB_FLUSH_S[$s]:-}" "${WB_DD_S[$s]:-}" "${WB_DD_ALL[$s]:-}"; done)" \
	    --arg rss "${RSS_MAX_KIB:-}	${RSS_HWM_KIB:-}	${RSS_WRITTEN:-}	${RSS_SECS:-}" \
	    --argjson problems "$(for s in "${STATUS[@]}"; do printf '%s\n' "$s"; done | jq -R . | jq -s .)" '
	    def num: if . == "" or . == null then null else (tonumber? // .) end;
	    {format: 1, date: $date, command: $command, minutes: ($minutes | num),
	     runtime_s: $runtime, rounds: $rounds, size: $size,
	     wbd: {version: $wbd_version, cache_size: $wbd_cache,
	           profiles: {burst: $burst, sustained: $sustained},
	           burst_check: $burst_check},
	     servers: $servers, started: $up, multi_conn: $multi_conn,
	     cases: $cases, runs: $runs,
	     timeline_case: $timeline_case, timelines: $timelines,
	     targets: $targets,
	     writeback: ([$wb | split("\n")[] | select(. != "") | split("\t") |
	         {(.[0]): {fill_s: (.[1] | num), flush_s: (.[2] | num),
	                   dd_median_s: (.[3] | num), dd_runs_s: .[4]}}] | add),
	     rss: ($rss | split("\t") | {max_kib: (.[0] | num), hwm_kib: (.[1] | num),
	           written_mib: (.[2] | num), seconds: (.[3] | num)}),
	     problems: $problems}' >"$1"
}

# --- the Markdown report ----------------------------------------------------------

machine_info() {
	local cpu mem fs
	cpu=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
	mem=$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
	fs=$(df -T "$T" | awk 'NR == 2 { print $2 " on " $1 }')
	echo "- CPU: $(nproc) × $cpu"
	echo "- RAM: $mem; kernel $(uname -r)"
	echo "- temporary directory (sockets, backing files, dd): $fs"
	echo "- fio $(fio --version | sed 's/^fio-//'), $(nbdkit --version), $(qemu-nbd --version | head -n 1)"
	echo "- wbd $WBD_VERSION, built with \`meson setup build-bench --buildtype=release\`"
}

# server_rows: the table of the servers and their commands.
server_rows() {
	local s cmd
	for s in "${SERVERS[@]}"; do
		case $s in
		wbd) cmd="\`wbd -f -c wbd.conf\`: \`cache.size = \"$WBD_CACHE\"\` (holds the whole export), \`page_size = \"4K\"\`, \`dirty_ratio = $WBD_DIRTY_RATIO\` (so 10 s of random writes are not throttled), the other writeback settings at their defaults, export \`cache_mode = \"writeback\"\` on a sparse file; the profile's thresholds set with \`wbctl tune\` before each write case (below)" ;;
		wbd-tls) cmd="as wbd, with \`tls = { mode = \"require\"; }\` (X.509 certificates made for the run)" ;;
		nbdkit-null) cmd="\`nbdkit null size=$SIZE\`: stores nothing, reads zeroes — the protocol's ceiling on this machine" ;;
		nbdkit-memory) cmd="\`nbdkit memory size=$SIZE\`: keeps everything in RAM, never writes back" ;;
		nbdkit-file) cmd="\`nbdkit file file=IMG\` on a sparse file" ;;
		nbdkit-file-cache) cmd="\`nbdkit --filter=cache file file=IMG cache=writeback\`, cache file in the same temporary directory" ;;
		qemu-nbd) cmd="\`qemu-nbd -f raw --cache=writeback --persistent --shared=16 IMG\`" ;;
		esac
		printf '| %s | %s | %s |\n' "$s" "$cmd" "${MC[$s]:-not started}"
	done
}

case_rows() {
	local c p
	for c in "${CASES[@]}"; do
		p=$(case_profile "$c")
		case $p in
		burst) p="burst thresholds" ;;
		sustained) p="sustained thresholds" ;;
		*) p="as left by the case before (nothing dirty)" ;;
		esac
		# shellcheck disable=SC2016  # Markdown's backquotes
		printf '| %s | `%s` | %s |\n' "$(case_label "$c")" "$(case_args "$c")" "$p"
	done
}

# charts_md DIR: the charts found in DIR (relative links bench/NAME).
charts_md() {
	local c f
	for c in "${CASES[@]}"; do
		f=case-$c.png
		[[ -f $1/$f ]] && printf '![%s](bench/%s)\n\n' "$(case_label "$c") ($(case_unit "$c"))" "$f"
	done
	f=timeline-wbd-$TIMELINE_CASE.png
	if [[ -f $1/$f ]]; then
		cat <<-EOF
		wbd during the $(case_label "$TIMELINE_CASE") case: dirty data in its
		cache and the bandwidth of its writeback, from \`wbctl --json status\`
		sampled every $TIMELINE_PERIOD s, from half a second before fio started
		until the FLUSH after it was answered (the background threshold and
		the dirty limit dashed), one line per round:

		![wbd: dirty data and writeback bandwidth](bench/$f)

		EOF
	fi
	return 0
}

write_doc() {
	local f=$1 s
	{
		cat <<-EOF
		# Benchmarks

		Written by \`bench/run.sh\`; do not edit by hand — run it again.
		Every figure down to the sections on remote devices comes from
		the same run; those sections (\`bench/remote-drain.sh\`,
		\`bench/remote-fio.sh\`) are written by hand and kept by it.
		The charts are drawn by \`bench/charts.py\` from the run's
		\`summary.json\` (\`bench/charts.py bench/results/STAMP\` draws them
		again).

		## The run

		- date: $RUN_DATE
		- command: \`$RUN_CMD\` (took $RUN_MINUTES min)
		$(machine_info)

		**fio and the server share the machine's $(nproc) cores.** fio's
		nbd engine (libnbd) runs on the same CPUs as the server it drives, so
		the CPU each server spends per request, not the disk, decides most of
		these figures; the CPU table shows it.

		## What is measured

		All servers are started by the script, each on a Unix socket in a
		temporary directory, and stopped by their PIDs at the end.  Every
		export is $SIZE.  Multi-conn is what \`nbdinfo --can multi-conn\`
		says of the server: the 4-connection cases run only where it is yes.

		| server | command | multi-conn |
		|---|---|---|
		$(server_rows)

		fio $(fio --version | sed 's/^fio-//') with \`--ioengine=nbd\`, one job
		and one connection per case except the 4-connection cases (a job per
		connection, fio's nbd engine opening one connection per job, reported
		together), \`--time_based --runtime=$RT\`:

		| case | fio | wbd |
		|---|---|---|
		$(case_rows)

		**Burst and sustained.** The two profiles run the same fio job; only
		wbd's writeback thresholds differ, set with \`wbctl tune\` before each
		of its write cases.  *Sustained*: \`$SUSTAINED_TUNE\` (the
		defaults): background writeback starts at 10% of the cache, about
		$(($(numfmt --from=iec "$WBD_CACHE") / 10 / 1048576)) MiB, so wbd writes back for most of the case, on the same
		cores as fio.  *Burst*: \`$BURST_TUNE\`: the background threshold
		is more than the whole $SIZE export can dirty, and no page can expire
		during the case, so the writes fit under the threshold and nothing is
		written back until the FLUSH after the case.  The other servers run
		the same job in both profiles.  Burst check (\`wbctl --json status\`
		before and after every wbd run of a burst case: bytes written back,
		background writeback queued): $(burst_check).

		Before the cases, every server but nbdkit null is filled by one
		sequential 1 MiB pass over its whole export and sent a FLUSH, so reads
		return stored data — for wbd, from its cache, which holds the whole
		export (cached reads).  Then each case runs on every server in turn,
		each run followed by a FLUSH (not timed) so the next starts with
		nothing dirty, and the whole series is repeated $ROUNDS times with the
		order of the servers rotated each round.  The tables give the median
		of the $ROUNDS rounds; the spread between rounds is shown after them,
		and in the charts, because on this small virtual machine it is large.
		Reads of the file-backed servers are served from the kernel's page
		cache: the machine's RAM is larger than the exports.

		## Results

		Throughput (IOPS for 4 KiB, MiB/s for 1 MiB), median of $ROUNDS rounds:

		EOF
		by_case fig ratio
		cat <<-EOF

		Server CPU time per request in µs (user + system of the server
		process, all threads, from \`/proc/PID/stat\` over the fio run,
		divided by the requests fio completed; writeback during the case
		counts, the FLUSH after it does not), median of $ROUNDS rounds:

		EOF
		by_case cell_cpu ratio
		cat <<-EOF

		Every round (same units as the first table, rounds in order):

		EOF
		by_case cell_rounds
		cat <<-EOF

		FLUSH after each case, in seconds, each round (not part of the figures
		above; for the write-back servers, the time to write back what the
		case dirtied):

		EOF
		by_case cell_flush
		cat <<-EOF

		wbd around each write case, every round (from \`wbctl --json status\`
		just before fio started and just after it ended; connections halfway
		through the 4-connection cases):

		EOF
		wbd_table
		echo
		echo "## Charts"
		echo
		if [[ -n $CHART_NOTE ]]; then
			printf '%s\n\n' "$CHART_NOTE"
		fi
		cat <<-EOF
		A bar per server: the median of the $ROUNDS rounds, the error bar
		from the lowest to the highest round; the dashed line is the target's
		level where issue 13 sets one.

		EOF
		charts_md "$CHART_DIR"
		cat <<-EOF
		## Targets (issue 13)

		Ratios of medians of this run.  The CPU targets are taken in the
		sustained cases; the 4-connection target in the burst one (the
		sustained one is given for information).$([[ $EXTRA == *rss* ]] && printf '\n%s' \
		    "The last row is not issue 13's: issue 3's bound on wbd's memory.")

		| target | measured | goal | result |
		|---|---|---|---|
		EOF
		printf '%s\n' "${TARGET_ROWS[@]}"
		if [[ $EXTRA == *rss* ]]; then
			cat <<-EOF

			**RSS.** wbd with \`cache.size = "$RSS_CACHE"\` and default writeback
			settings (background 10%, dirty limit 20%) serving a 4 GiB export,
			while fio writes \`--io_size=2g\` of 4 KiB random blocks at depth 32
			(\`--norandommap\`, at most ${RSS_TIMEOUT} s): ${RSS_WRITTEN:-?} MiB
			written in ${RSS_SECS:-?} s.  VmRSS was sampled from
			\`/proc/PID/status\` every 0.2 s; the largest sample was
			${RSS_MAX_KIB:-?} KiB, and the kernel's own peak (VmHWM) ${RSS_HWM_KIB:-?} KiB.
			EOF
		fi
		if [[ $EXTRA == *writeback* ]]; then
			cat <<-EOF

			**Writeback of random dirty pages.** wbd with \`cache.size = "2G"\`,
			\`dirty_writeback_centisecs = 0\` (no periodic writeback),
			\`dirty_background_ratio = 90\`, \`dirty_ratio = 95\`, one 1 GiB
			export: fio wrote every 4 KiB block once in random order
			(\`--rw=randwrite --bs=4k --iodepth=32\`, fio's random map), then
			\`sync\`, then one FLUSH (libnbd's \`h.flush()\`,
			\`bench/nbd-flush.py\`) was timed.  Two setups, because the
			filesystem here is mounted with \`discard\` on a virtual disk and
			writing newly allocated blocks costs much more, and varies much
			more, than overwriting:

			| setup | random fill | FLUSH | backing file after | dd 1 GiB sequential (3 runs) | median |
			|---|---:|---:|---:|---|---:|
			| fresh sparse backing file (wbd allocates as it writes back); dd writes a new file, \`conv=fdatasync\` | ${WB_FILL_S[sparse]:-?} s | ${WB_FLUSH_S[sparse]:-?} s | ${WB_ALLOC_MIB[sparse]:-?} MiB | ${WB_DD_ALL[sparse]:-?} s | ${WB_DD_S[sparse]:-?} s |
			| backing file written beforehand; dd overwrites a written file, \`conv=fdatasync,notrunc\` | ${WB_FILL_S[prealloc]:-?} s | ${WB_FLUSH_S[prealloc]:-?} s | ${WB_ALLOC_MIB[prealloc]:-?} MiB | ${WB_DD_ALL[prealloc]:-?} s | ${WB_DD_S[prealloc]:-?} s |

			Every dd and the FLUSH follow a \`sync\` and a 1 s pause, in the same
			directory as the backing file (\`dd if=/dev/zero bs=1M count=1024\`).
			EOF
		fi
		if ((${#STATUS[@]} > 0)); then
			echo
			echo "## Problems during the run"
			echo
			for s in "${STATUS[@]}"; do echo "- $s"; done
		fi
		if [[ -n $WBD_LOG_NOTES ]]; then
			echo
			echo "## wbd's logs"
			echo
			echo "Warnings and errors wbd logged during the run:"
			echo
			echo '```'
			printf '%s\n' "$WBD_LOG_NOTES"
			echo '```'
		fi
	} >"$f"
}

# --- main ----------------------------------------------------------------------

# bench/remote-fio.sh sources this file for the definitions above: stop here.
if [[ ${BASH_SOURCE[0]} != "$0" ]]; then return 0; fi

SIZE_BYTES=$(numfmt --from=iec "$SIZE") || die "BENCH_SIZE=$SIZE is not a size"
(($(numfmt --from=iec "$WBD_CACHE") * BURST_BG_RATIO / 100 > SIZE_BYTES)) ||
    die "BENCH_SIZE=$SIZE: a burst would not fit under wbd's background threshold ($BURST_BG_RATIO% of $WBD_CACHE)"

install_deps
build_wbd
build_wbctl
HZ=$(getconf CLK_TCK)
WBD_VERSION=${BENCH_WBD_VERSION:-$(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown)}

T=$(mktemp -d "${BENCH_TMPDIR:-/var/tmp}/wbd-bench.XXXXXX")
mkdir -p "$T/json"
: >"$T/runs.tsv"
((${#T} < 80)) || die "temporary directory $T is too long for Unix socket paths"
say "temporary directory $T ($(df -T "$T" | awk 'NR == 2 { print $2 }')); $RT s per case; cases: ${CASES[*]}"

bench_compare
[[ $EXTRA == *rss* ]] && bench_rss
[[ $EXTRA == *writeback* ]] && bench_writeback

# Anything wbd logged at warning level or worse, for the report.
WBD_LOG_NOTES=$(cat "$T"/wbd*.log 2>/dev/null |
    grep -Ei 'warn|error|fail|fatal|abort|assert|sanitizer' | head -n 40 || true)

RUN_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
RUN_MINUTES=$(awk -v s=$(($(date +%s) - START_EPOCH)) 'BEGIN { printf "%.1f", s / 60 }')
RUN_CMD="bash bench/run.sh"
[[ -n ${BENCH_RUNTIME:-} ]] && RUN_CMD="BENCH_RUNTIME=$RT $RUN_CMD"
[[ -n ${BENCH_ROUNDS:-} ]] && RUN_CMD="BENCH_ROUNDS=$ROUNDS $RUN_CMD"
[[ -n ${BENCH_SIZE:-} ]] && RUN_CMD="BENCH_SIZE=$SIZE $RUN_CMD"
[[ -n ${BENCH_SERVERS:-} ]] && RUN_CMD="BENCH_SERVERS='${SERVERS[*]}' $RUN_CMD"
[[ -n ${BENCH_CASES:-} ]] && RUN_CMD="BENCH_CASES='${CASES[*]}' $RUN_CMD"
[[ ${BENCH_EXTRA+set} ]] && RUN_CMD="BENCH_EXTRA='$EXTRA' $RUN_CMD"
compute_targets

mkdir -p "$RESULTS"
cp "$T"/json/*.json "$T"/json/*.jsonl "$T"/*.log "$T"/*.conf "$RESULTS"/ 2>/dev/null || true
write_summary "$RESULTS/summary.json"

# The charts: drawn into the results, then copied beside the doc.
CHART_DIR=$RESULTS/bench
CHART_NOTE=
if ! have_matplotlib; then
	CHART_NOTE="No charts: python3-matplotlib was not installed (WBD_SKIP_DEPS)."
elif ! "$PY" "$REPO/bench/charts.py" "$RESULTS" "$CHART_DIR" >"$T/charts.log" 2>&1; then
	CHART_NOTE="No charts: bench/charts.py failed ($(tail -n 1 "$T/charts.log"))."
	STATUS+=("bench/charts.py failed: $(tail -n 1 "$T/charts.log")")
fi
[[ -z $CHART_NOTE ]] || say "$CHART_NOTE"
write_doc "$RESULTS/benchmarks.md"
# The generated part of the doc lies between the BEGIN and END markers;
# what other benchmarks (remote-drain.sh, remote-fio.sh) and people wrote
# around them is kept.  The charts of the last run replace those of the
# run before in bench/ beside the doc.
if [[ $DOC != - ]]; then
	/usr/bin/python3 - "$RESULTS/benchmarks.md" "$DOC" <<'PY'
import os, sys
new = open(sys.argv[1]).read().rstrip("\n") + "\n"
begin = "<!-- BEGIN bench/run.sh: generated, replaced by its next run -->\n"
end = "<!-- END bench/run.sh -->\n"
old = open(sys.argv[2]).read() if os.path.exists(sys.argv[2]) else ""
if begin in old and end in old:
    head, rest = old.split(begin, 1)
    tail = rest.split(end, 1)[1]
else:
    head, tail = "", ("\n" + old if old else "")
open(sys.argv[2], "w").write(head + begin + new + end + tail)
PY
	say "wrote the generated part of $DOC"
	doc_charts=$(dirname "$DOC")/bench
	rm -f "$doc_charts"/case-*.png "$doc_charts"/timeline-*.png
	if compgen -G "$CHART_DIR/*.png" >/dev/null; then
		mkdir -p "$doc_charts"
		cp "$CHART_DIR"/*.png "$doc_charts"/
		say "charts in $doc_charts"
	fi
fi

echo
by_case fig ratio
echo
echo "server CPU per request (µs):"
by_case cell_cpu ratio
echo
echo "burst check: $(burst_check)"
echo
echo "Targets (issue 13):"
printf '  %s\n' "${SUMMARY[@]}"
if ((${#STATUS[@]} > 0)); then
	echo
	echo "problems:"
	printf '  %s\n' "${STATUS[@]}"
fi
[[ -n $WBD_LOG_NOTES ]] && printf '\nwbd logged:\n%s\n' "$WBD_LOG_NOTES"
say "raw results in $RESULTS"
