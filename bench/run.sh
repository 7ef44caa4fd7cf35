#!/usr/bin/env bash
# run.sh - wbd side by side with other NBD servers, in one run.
#
#   bash bench/run.sh
#
# Installs what it needs (scripts/install-deps.sh, plus qemu-utils, nbdkit
# and fio), builds wbd in build-bench/ (release), then starts six servers,
# each on a Unix socket in a temporary directory - wbd, nbdkit null, nbdkit
# memory, nbdkit file, nbdkit file with the cache filter in writeback mode,
# qemu-nbd --cache=writeback - and drives them with fio's nbd engine
# (BENCH_SERVERS may add wbd-tls: wbd with tls.mode "require", X.509,
# to see what TLS costs):
#
#   randwrite-4k  4 KiB random writes, queue depth 32
#   randread-4k   4 KiB random reads, queue depth 32
#   write-1m      1 MiB sequential writes, queue depth 8
#   read-1m       1 MiB sequential reads, queue depth 8
#
# Every server that stores data is first filled by one sequential pass over
# its whole export and FLUSHed, so reads return real data (for wbd, from its
# cache: the export fits in it), and each case is followed by a FLUSH so the
# next one starts clean.  Each case runs on every server in turn, and the
# whole series is repeated BENCH_ROUNDS times with the servers' order
# rotated; the median of the rounds is reported (on a small VM a single
# 10-second figure can be off by a factor of two).  Then two wbd-only
# measurements:
#
#   rss        wbd's peak VmRSS with cache.size = 256M while fio writes 2 GiB
#              of 4 KiB random blocks to a 4 GiB export, writeback active;
#   writeback  the time wbd takes to write back 1 GiB of 4 KiB random dirty
#              pages (one FLUSH, periodic and background writeback off),
#              against dd writing 1 GiB sequentially to the same filesystem.
#
# Prints the results and writes them, with the machine and the targets of
# issue 3, to docs/benchmarks.md.  Raw fio JSON and server logs are kept in
# bench/results/STAMP/.  Each server is started by this script and stopped
# by its PID.
#
# Environment:
#   BENCH_RUNTIME      seconds per fio case (default 10)
#   BENCH_ROUNDS       how many times each case runs on each server; the
#                      median counts (default 3)
#   BENCH_SIZE         export size for the comparison (default 1G)
#   BENCH_TMPDIR       where the temporary directory (sockets, backing files)
#                      is made (default /var/tmp: a disk, not a tmpfs)
#   BENCH_DOC          the Markdown file written (default docs/benchmarks.md;
#                      "-" writes none)
#   BENCH_SERVERS      the servers to run, space-separated (default all)
#   BENCH_EXTRA        "rss writeback" (default); "" skips both
#   BENCH_RSS_TIMEOUT  cap in seconds on the 2 GiB RSS run (default 300)
#   BENCH_KEEP=1       keep the temporary directory
#   WBD                a wbd binary to use instead of building build-bench/
#   BENCH_WBD_VERSION  how the report names that binary (default: git describe)
#   WBD_SKIP_DEPS=1    do not install packages
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
CASES=(randwrite-4k randread-4k write-1m read-1m)
WBD_CACHE=2G             # holds the whole export
WBD_DIRTY_RATIO=80       # so 10 s of 4 KiB random writes are not throttled
RSS_CACHE=256M
START_EPOCH=$(date +%s)
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
RESULTS=$REPO/bench/results/$STAMP

[[ $RT =~ ^[0-9]+$ ]] && ((RT > 0)) || { echo "bench: BENCH_RUNTIME must be a positive integer" >&2; exit 2; }
[[ $ROUNDS =~ ^[0-9]+$ ]] && ((ROUNDS > 0)) || { echo "bench: BENCH_ROUNDS must be a positive integer" >&2; exit 2; }

say() { printf 'bench: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# --- dependencies and build -------------------------------------------------

install_deps() {
	local missing=() p
	bash "$REPO/scripts/install-deps.sh"
	for p in qemu-nbd:qemu-utils nbdkit:nbdkit fio:fio jq:jq nbdinfo:libnbd-bin; do
		command -v "${p%%:*}" >/dev/null 2>&1 || missing+=("${p#*:}")
	done
	"$PY" -c 'import nbd' 2>/dev/null || missing+=(python3-libnbd)
	((${#missing[@]} == 0)) && return 0
	[[ -n ${WBD_SKIP_DEPS:-} ]] && die "missing: ${missing[*]} (WBD_SKIP_DEPS is set)"
	local sudo=()
	((EUID == 0)) || sudo=(sudo)
	say "installing ${missing[*]}"
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
	set -- $s
	echo $((${12} + ${13}))
}

vm_kib() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null; }

# --- servers -------------------------------------------------------------------

SRV_PID=
SRV_URI=
SRV_LOG=

# write_wbd_conf FILE SOCKET BACKING SIZE CACHE_SIZE WRITEBACK_KEYS
write_wbd_conf() {
	cat >"$1" <<-EOF
	# written by bench/run.sh
	listen = { unix = [ "$2" ]; };
	control = { socket = "${2%.sock}-control.sock"; };
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

nbd_flush() { "$PY" "$REPO/bench/nbd-flush.py" "$1"; }

# --- fio -------------------------------------------------------------------------

# run_fio OUT.json URI FIO-ARGS...
run_fio() {
	local out=$1 uri=$2
	shift 2
	(cd "$T" && fio --name=bench --ioengine=nbd --uri="$uri" --numjobs=1 \
	    --output-format=json --output="$out" "$@") >>"$T/fio.log" 2>&1
}

case_args() {
	local common="--time_based --runtime=$RT"
	case $1 in
	randwrite-4k) echo "$common --rw=randwrite --bs=4k --iodepth=32 --norandommap --randrepeat=0" ;;
	randread-4k) echo "$common --rw=randread --bs=4k --iodepth=32 --norandommap --randrepeat=0" ;;
	write-1m) echo "$common --rw=write --bs=1m --iodepth=8" ;;
	read-1m) echo "$common --rw=read --bs=1m --iodepth=8" ;;
	esac
}

case_dir() { case $1 in *read*) echo read ;; *) echo write ;; esac; }

# fio_get JSON DIR: "iops bw_bytes total_ios io_bytes", or fails if fio
# reported an error.
fio_get() {
	jq -er --arg d "$2" '.jobs[0] | select(.error == 0) | .[$d] |
	    "\(.iops) \(.bw_bytes) \(.total_ios) \(.io_bytes)"' "$1"
}

declare -A IOPS MIBS CPU_US FLUSH_S     # medians over the rounds
declare -A R_IOPS R_MIBS R_CPU          # [server,case,round]
declare -A S_PID S_URI                  # the running servers
UP=()            # servers that started
STATUS=()        # "server: what went wrong", for the report

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
	UP+=("$name")
	[[ $name == nbdkit-null ]] && return 0
	if ! run_fio "$T/json/$name-fill.json" "$SRV_URI" --rw=write --bs=1m --iodepth=8 ||
	   ! fio_get "$T/json/$name-fill.json" write >/dev/null; then
		STATUS+=("$name: filling the export failed")
	fi
	f=$(nbd_flush "$SRV_URI") || f=error
	say "$name: filled the $SIZE export; FLUSH $f s"
}

# run_case NAME CASE ROUND: one fio run, then a FLUSH.
run_case() {
	local name=$1 c=$2 r=$3 pid=${S_PID[$1]} uri=${S_URI[$1]} out t0 t1 vals iops bw ios f
	if ! proc_alive "$pid"; then
		STATUS+=("$name: server no longer running at $c, round $r")
		return 0
	fi
	out=$T/json/$name-$c-r$r.json
	t0=$(cpu_ticks "$pid")
	# shellcheck disable=SC2046
	if ! run_fio "$out" "$uri" $(case_args "$c") ||
	   ! vals=$(fio_get "$out" "$(case_dir "$c")"); then
		STATUS+=("$name: fio $c failed in round $r (see fio.log)")
		return 0
	fi
	t1=$(cpu_ticks "$pid")
	read -r iops bw ios _ <<<"$vals"
	R_IOPS[$name,$c,$r]=$(awk -v x="$iops" 'BEGIN { printf "%.0f", x }')
	R_MIBS[$name,$c,$r]=$(awk -v x="$bw" 'BEGIN { printf "%.1f", x / 1048576 }')
	R_CPU[$name,$c,$r]=$(awk -v t=$((t1 - t0)) -v hz="$HZ" -v n="$ios" \
	    'BEGIN { if (n > 0) printf "%.1f", t / hz * 1e6 / n; else print "-" }')
	f=$(nbd_flush "$uri") || f=error
	FLUSH_S[$name,$c]="${FLUSH_S[$name,$c]:+${FLUSH_S[$name,$c]}, }$f"
	say "$(printf 'round %s %-17s %-13s %8s IOPS %8s MiB/s  server CPU %6s us/req  FLUSH %s s' \
	    "$r" "$name" "$c" "${R_IOPS[$name,$c,$r]}" "${R_MIBS[$name,$c,$r]}" "${R_CPU[$name,$c,$r]}" "$f")"
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

# ratio A B: A/B to two decimals, or "-".
ratio() {
	[[ -n $1 && -n $2 && $1 != - && $2 != - ]] || { echo -; return; }
	awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'
}

# verdict VALUE OP LIMIT: MET or NOT MET (or "NOT MEASURED").
verdict() {
	[[ -n $1 && $1 != - ]] || { echo "NOT MEASURED"; return; }
	awk -v v="$1" -v l="$3" -v op="$2" 'BEGIN {
		ok = (op == ">=") ? (v >= l) : (v <= l)
		print ok ? "MET" : "NOT MET" }'
}

fig() {     # fig SERVER CASE: the headline figure of a case
	case $2 in
	*-4k) echo "${IOPS[$1,$2]:--}" ;;
	*) echo "${MIBS[$1,$2]:--}" ;;
	esac
}

results_table() {
	local s c
	echo "| server | 4K randwrite QD32 (IOPS) | 4K randread QD32 (IOPS) | 1M write QD8 (MiB/s) | 1M read QD8 (MiB/s) |"
	echo "|---|---:|---:|---:|---:|"
	for s in "${SERVERS[@]}"; do
		printf '| %s |' "$s"
		for c in "${CASES[@]}"; do printf ' %s |' "$(fig "$s" "$c")"; done
		echo
	done
}

rounds_table() {
	local s c r cell
	echo "| server | 4K randwrite (IOPS) | 4K randread (IOPS) | 1M write (MiB/s) | 1M read (MiB/s) |"
	echo "|---|---:|---:|---:|---:|"
	for s in "${SERVERS[@]}"; do
		printf '| %s |' "$s"
		for c in "${CASES[@]}"; do
			cell=
			for ((r = 1; r <= ROUNDS; r++)); do
				case $c in
				*-4k) cell+="${cell:+, }${R_IOPS[$s,$c,$r]:--}" ;;
				*) cell+="${cell:+, }${R_MIBS[$s,$c,$r]:--}" ;;
				esac
			done
			printf ' %s |' "$cell"
		done
		echo
	done
}

cpu_table() {
	local s c
	echo "| server | 4K randwrite | 4K randread | 1M write | 1M read |"
	echo "|---|---:|---:|---:|---:|"
	for s in "${SERVERS[@]}"; do
		printf '| %s |' "$s"
		for c in "${CASES[@]}"; do printf ' %s |' "${CPU_US[$s,$c]:--}"; done
		echo
	done
}

flush_table() {
	local s c
	echo "| server | after 4K randwrite | after 4K randread | after 1M write | after 1M read |"
	echo "|---|---:|---:|---:|---:|"
	for s in "${SERVERS[@]}"; do
		printf '| %s |' "$s"
		for c in "${CASES[@]}"; do printf ' %s |' "${FLUSH_S[$s,$c]:--}"; done
		echo
	done
}

TARGET_ROWS=()
SUMMARY=()

# target LABEL DETAIL VALUE OP LIMIT GOAL-TEXT
target() {
	local v
	v=$(verdict "$3" "$4" "$5")
	TARGET_ROWS+=("| $1 | $2 | $6 | **$v** |")
	SUMMARY+=("$v: $1 ($2; goal $6)")
}

compute_targets() {
	local c r
	local -A label=([randwrite-4k]="4K randwrite" [randread-4k]="4K randread"
	    [write-1m]="1M sequential write" [read-1m]="1M sequential read")
	local -A unit=([randwrite-4k]=IOPS [randread-4k]=IOPS [write-1m]=MiB/s [read-1m]=MiB/s)
	r=$(ratio "$(fig wbd randwrite-4k)" "$(fig nbdkit-memory randwrite-4k)")
	target "wbd / nbdkit memory, 4K randwrite" \
	    "$(fig wbd randwrite-4k) / $(fig nbdkit-memory randwrite-4k) IOPS = ${r}×" "$r" ">=" 1.10 "≥ 1.10×"
	r=$(ratio "$(fig wbd randread-4k)" "$(fig nbdkit-memory randread-4k)")
	target "wbd / nbdkit memory, 4K randread (cached)" \
	    "$(fig wbd randread-4k) / $(fig nbdkit-memory randread-4k) IOPS = ${r}×" "$r" ">=" 1.00 "≥ 1.00×"
	for c in "${CASES[@]}"; do
		r=$(ratio "$(fig wbd "$c")" "$(fig nbdkit-null "$c")")
		target "wbd / nbdkit null, ${label[$c]}" \
		    "$(fig wbd "$c") / $(fig nbdkit-null "$c") ${unit[$c]} = ${r}×" "$r" ">=" 0.90 "≥ 0.90× (within 10%)"
	done
	if [[ $EXTRA == *rss* ]]; then
		local max_mib hwm_mib limit_mib
		limit_mib=$(awk 'BEGIN { printf "%.1f", 256 * 1.05 + 32 }')
		max_mib=$([[ -n $RSS_MAX_KIB ]] && awk -v k="$RSS_MAX_KIB" 'BEGIN { printf "%.1f", k / 1024 }' || echo -)
		hwm_mib=$([[ -n $RSS_HWM_KIB ]] && awk -v k="$RSS_HWM_KIB" 'BEGIN { printf "%.1f", k / 1024 }' || echo -)
		target "wbd max VmRSS, cache.size = 256M, 2 GiB 4K random writes" \
		    "$max_mib MiB sampled (VmHWM $hwm_mib MiB)" "$max_mib" "<=" "$limit_mib" "≤ $limit_mib MiB (256 MiB + 5% + 32 MiB)"
	fi
	if [[ $EXTRA == *writeback* ]]; then
		r=$(ratio "${WB_FLUSH_S[sparse]:-}" "${WB_DD_S[sparse]:-}")
		target "wbd writeback of 1 GiB of 4K random dirty pages / dd 1 GiB sequential — new sparse file" \
		    "${WB_FLUSH_S[sparse]:--} s / ${WB_DD_S[sparse]:--} s = ${r}×" "$r" "<=" 1.30 "≤ 1.30×"
		r=$(ratio "${WB_FLUSH_S[prealloc]:-}" "${WB_DD_S[prealloc]:-}")
		target "the same, over an already written file" \
		    "${WB_FLUSH_S[prealloc]:--} s / ${WB_DD_S[prealloc]:--} s = ${r}×" "$r" "<=" 1.30 "≤ 1.30×"
	fi
}

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

write_doc() {
	local f=$1 s
	{
		cat <<-EOF
		# Benchmarks

		Written by \`bench/run.sh\`; do not edit by hand — run it again.
		Every figure down to the sections on remote devices comes from
		the same run; those sections (\`bench/remote-drain.sh\`,
		\`bench/remote-fio.sh\`) are written by hand and kept by it.

		## The run

		- date: $RUN_DATE
		- command: \`$RUN_CMD\` (took $RUN_MINUTES min)
		$(machine_info)

		**fio and the server share the machine's $(nproc) cores.** fio's
		nbd engine (libnbd) runs on the same CPUs as the server it drives, so
		the CPU each server spends per request, not the disk, decides most of
		these figures; the second table shows it.

		## What is measured

		All six servers are started by the script, each on a Unix socket in a
		temporary directory, and stopped by their PIDs at the end.  Every
		export is $SIZE.

		| server | command |
		|---|---|
		| wbd | \`wbd -f -c wbd.conf\`: \`cache.size = "$WBD_CACHE"\` (holds the whole export), \`page_size = "4K"\`, \`dirty_ratio = $WBD_DIRTY_RATIO\` (so 10 s of random writes are not throttled), other writeback settings at their defaults (background writeback from 10%, periodic every 5 s), export \`cache_mode = "writeback"\` on a sparse file |
		| nbdkit-null | \`nbdkit null size=$SIZE\`: stores nothing, reads zeroes — the protocol's ceiling on this machine |
		| nbdkit-memory | \`nbdkit memory size=$SIZE\`: keeps everything in RAM, never writes back |
		| nbdkit-file | \`nbdkit file file=IMG\` on a sparse file |
		| nbdkit-file-cache | \`nbdkit --filter=cache file file=IMG cache=writeback\`, cache file in the same temporary directory |
		| qemu-nbd | \`qemu-nbd -f raw --cache=writeback --persistent --shared=16 IMG\` |

		fio $(fio --version | sed 's/^fio-//') with \`--ioengine=nbd\`, one job, one
		connection, \`--time_based --runtime=$RT\` per case:

		| case | fio |
		|---|---|
		| 4K randwrite | \`--rw=randwrite --bs=4k --iodepth=32 --norandommap --randrepeat=0\` |
		| 4K randread | \`--rw=randread --bs=4k --iodepth=32 --norandommap --randrepeat=0\` |
		| 1M write | \`--rw=write --bs=1m --iodepth=8\` |
		| 1M read | \`--rw=read --bs=1m --iodepth=8\` |

		Before the cases, every server but nbdkit null is filled by one
		sequential 1 MiB pass over its whole export and sent a FLUSH, so reads
		return stored data — for wbd, from its cache, which holds the whole
		export (cached reads).  Then each case runs on every server in turn,
		each run followed by a FLUSH (not timed) so the next starts with
		nothing dirty, and the whole series is repeated $ROUNDS times with the
		order of the servers rotated each round.  The tables give the median
		of the $ROUNDS rounds; the spread between rounds is shown after them,
		because on this small virtual machine it is large.  Reads of the
		file-backed servers are served from the kernel's page cache: the
		machine's RAM is larger than the exports.

		## Results

		Throughput (IOPS for 4 KiB, MiB/s for 1 MiB), median of $ROUNDS rounds:

		EOF
		results_table
		cat <<-EOF

		Server CPU time per request in µs (user + system of the server
		process, all threads, from \`/proc/PID/stat\`, divided by the requests
		fio completed), median of $ROUNDS rounds:

		EOF
		cpu_table
		cat <<-EOF

		Every round (same units as the first table, rounds in order):

		EOF
		rounds_table
		cat <<-EOF

		FLUSH after each case, in seconds, each round (not part of the figures
		above; for the write-back servers, the time to write back what the
		case dirtied):

		EOF
		flush_table
		cat <<-EOF

		## Targets (issue 3)

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

install_deps
build_wbd
HZ=$(getconf CLK_TCK)
WBD_VERSION=${BENCH_WBD_VERSION:-$(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown)}

T=$(mktemp -d "${BENCH_TMPDIR:-/var/tmp}/wbd-bench.XXXXXX")
mkdir -p "$T/json"
((${#T} < 80)) || die "temporary directory $T is too long for Unix socket paths"
say "temporary directory $T ($(df -T "$T" | awk 'NR == 2 { print $2 }')); $RT s per case"

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
[[ ${BENCH_EXTRA+set} ]] && RUN_CMD="BENCH_EXTRA='$EXTRA' $RUN_CMD"
compute_targets

mkdir -p "$RESULTS"
cp "$T"/json/*.json "$T"/*.log "$T"/*.conf "$RESULTS"/ 2>/dev/null || true
write_doc "$RESULTS/benchmarks.md"
# The generated part of the doc lies between the BEGIN and END markers;
# what other benchmarks (remote-drain.sh, remote-fio.sh) and people wrote
# around them is kept.
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
fi

echo
results_table
echo
echo "server CPU per request (µs):"
cpu_table
echo
printf '%s\n' "${SUMMARY[@]}"
if ((${#STATUS[@]} > 0)); then
	echo
	echo "problems:"
	printf '  %s\n' "${STATUS[@]}"
fi
[[ -n $WBD_LOG_NOTES ]] && printf '\nwbd logged:\n%s\n' "$WBD_LOG_NOTES"
say "raw results in $RESULTS"
