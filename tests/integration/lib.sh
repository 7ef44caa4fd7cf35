# SPDX-License-Identifier: GPL-2.0-or-later
# lib.sh - shared helpers for wbd's integration tests.  Sourced, not run.
#
# Every test is one bash script named after the behaviour it checks.  It
# sources this file, which makes a temporary directory ($T), picks a free TCP
# port ($PORT) and a Unix socket path ($SOCK), and installs an EXIT trap that
# stops every process the test started (SIGTERM, then SIGKILL), fails the test
# if a daemon log holds a sanitizer report, and removes $T.
#
# A daemon's exit status is checked, never thrown away: stop_wbd fails the
# test unless wbd exits with the status expected (0 after SIGTERM or
# SIGINT), and at exit every wbd started through spawn_wbd (start_wbd) or
# recorded with track_wbd that the test did not wait for itself (stop_wbd,
# wait_exit) fails the test if it had already exited on its own, or if it
# exits with a status other than 0 on SIGTERM.
#
# Exit codes follow meson/automake: 0 pass, 1 fail, 77 skip.
#
# Environment: WBD (path of the daemon, set by meson), SRCDIR (this
# directory), KEEP_TMP=1 to keep $T for a post-mortem.

set -euo pipefail

TEST_NAME=$(basename "$0" .sh)
: "${WBD:?WBD must name the wbd binary (meson sets it)}"
: "${SRCDIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"

# Absolute paths, because the test runs inside its temporary directory.
SRCDIR=$(cd "$SRCDIR" && pwd)
[[ $WBD == */* ]] && WBD=$(cd "$(dirname "$WBD")" && pwd)/$(basename "$WBD")
[[ ${WBCTL:-} == */* ]] && WBCTL=$(cd "$(dirname "$WBCTL")" && pwd)/$(basename "$WBCTL")

T=$(mktemp -d "${TMPDIR:-/tmp}/wbd-it.XXXXXX")
cd "$T"           # whatever a client leaves behind (fio state files...) goes here
CONF=$T/wbd.conf
LOG=$T/wbd.log
SOCK=$T/nbd.sock
PORT=
WBD_PID=
_PIDS=()          # every background process started through this library
_WBD_PIDS=()      # the daemons among them (spawn_wbd, track_wbd)
declare -gA _WBD_STATE=()  # their state: "run", or the status they exited with
_WBD_ERRORS=()    # how a daemon exited when it should not have, for _cleanup
_LOGS=()          # every daemon log, scanned for sanitizer reports at exit
_EXPORTS=()       # config lines built by add_export

log() { printf '%s: %s\n' "$TEST_NAME" "$*" >&2; }

# fail MESSAGE: print it with the daemon's log and exit 1.
fail() {
	printf 'FAIL: %s: %s\n' "$TEST_NAME" "$*" >&2
	_show_logs
	exit 1
}

# skip REASON: exit 77 (meson reports SKIP).
skip() {
	printf 'SKIP: %s: %s\n' "$TEST_NAME" "$*" >&2
	exit 77
}

# need PROGRAM...: skip unless each program is installed.
need() {
	local p
	for p in "$@"; do
		command -v "$p" >/dev/null 2>&1 || skip "$p is not installed"
	done
}

_show_logs() {
	[[ -n ${_LOGS_SHOWN:-} ]] && return 0
	_LOGS_SHOWN=1
	local l
	for l in "${_LOGS[@]}"; do
		[[ -s $l ]] || continue
		printf -- '--- %s (last 60 lines) ---\n' "$l" >&2
		tail -n 60 "$l" >&2
	done
}

trap 'printf "FAIL: %s: line %s: command failed (status %s): %s\n" \
	"$TEST_NAME" "$LINENO" "$?" "$BASH_COMMAND" >&2' ERR

# A PYTHON that can import libnbd's bindings (python3-libnbd installs into the
# system interpreter, which a pyenv or venv python3 on PATH cannot see).
PYTHON=
for _p in python3 /usr/bin/python3; do
	if command -v "$_p" >/dev/null 2>&1 &&
	   "$_p" -c 'import nbd' >/dev/null 2>&1; then
		PYTHON=$_p
		break
	fi
done
unset _p

need_python_nbd() {
	[[ -n $PYTHON ]] || skip "python3 bindings of libnbd (python3-libnbd) not found"
}

# proc_alive PID: true while PID runs (a zombie counts as dead).
proc_alive() {
	local state
	[[ -r /proc/$1/stat ]] || return 1
	state=$(sed 's/^.*) \(.\).*/\1/' "/proc/$1/stat" 2>/dev/null) || return 1
	[[ -n $state && $state != Z && $state != X ]]
}

# wait_log SECONDS PATTERN [PID]: wait up to SECONDS (whole) until wbd's
# log ($LOG) has a line matching PATTERN (grep's basic regular
# expression): 0 once it has, 1 if it has not by then, 2 as soon as PID
# (if given) is found gone first.
wait_log() {
	local i
	for ((i = 0; i < $1 * 10; i++)); do
		grep -q -e "$2" "$LOG" && return 0
		[[ -z ${3:-} ]] || proc_alive "$3" || return 2
		sleep 0.1
	done
	grep -q -e "$2" "$LOG"
}

# wait_exit PID SECONDS: wait up to SECONDS for PID (a child of this shell) to
# exit; sets EXIT_STATUS and returns 0, or returns 1 if it is still running.
# The caller owns the status: a daemon waited for here is not checked again
# at exit (see stop_wbd for one that checks it).
EXIT_STATUS=
wait_exit() {
	local pid=$1 limit=$(( $2 * 10 )) i=0
	while proc_alive "$pid"; do
		(( i++ < limit )) || return 1
		sleep 0.1
	done
	_reap "$pid"
	return 0
}

# _reap PID: wait for PID, which has exited; set EXIT_STATUS, and record it
# for a daemon.
_reap() {
	EXIT_STATUS=0
	wait "$1" 2>/dev/null || EXIT_STATUS=$?
	[[ -z ${_WBD_STATE[$1]:-} ]] || _WBD_STATE[$1]=$EXIT_STATUS
}

# describe_status STATUS: "status N", with the signal's name if it is 128+n.
describe_status() {
	local sig
	if (( $1 > 128 && $1 < 128 + 65 )) && sig=$(kill -l "$(($1 - 128))" 2>/dev/null); then
		printf 'status %s (killed by SIG%s)' "$1" "$sig"
	else
		printf 'status %s' "$1"
	fi
}

# free_port: print a TCP port on 127.0.0.1 that nobody listens on right now.
free_port() {
	python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# add_export NAME SIZE rw|ro [DESCRIPTION [BACKING]]: add an export to the
# next write_config.  The backing file defaults to $T/NAME.img.  wbd creates
# a missing backing file for a read-write export; for a read-only one (which
# would read as zeroes) the test makes an empty sparse file.
add_export() {
	local name=$1 size=$2 mode=$3 desc=${4:-} backing=${5:-$T/$1.img} ro=false line
	if [[ $mode == ro ]]; then
		ro=true
		[[ -e $backing ]] || truncate -s "$size" "$backing"
	fi
	line="  { name = \"$name\"; "
	[[ -n $desc ]] && line+="description = \"$desc\"; "
	line+="backing = \"$backing\"; size = \"$size\"; readonly = $ro; }"
	_EXPORTS+=("$line")
}

# add_export_allow NAME SIZE ENTRY...: add a read-write export (backing
# $T/NAME.img) whose allow list holds the ENTRYs ("127.0.0.2", "uid:1000",
# "group:disk"...); with none, an empty list (no one may open it).
add_export_allow() {
	local name=$1 size=$2 e list=
	shift 2
	for e in "$@"; do
		list+="${list:+, }\"$e\""
	done
	_EXPORTS+=("  { name = \"$name\"; backing = \"$T/$name.img\"; size = \"$size\"; allow = [ $list ]; }")
}

# What write_config adds: LISTEN_KEYS to the listen group (such as
# 'unix_mode = "0666";'), CONF_EXTRA as top-level lines (user = "nobody";).
LISTEN_KEYS=
CONF_EXTRA=

# write_config [FILE [SOCKET [PORT]]]: write a config with the exports added so
# far (default file $CONF, socket $SOCK, port $PORT, picked if empty).
write_config() {
	local file=${1:-$CONF} sock=${2:-$SOCK} port=${3:-} i
	if [[ -z $port ]]; then
		[[ -n $PORT ]] || PORT=$(free_port)
		port=$PORT
	fi
	((${#_EXPORTS[@]} > 0)) || fail "write_config: no exports (use add_export)"
	{
		echo "# written by $TEST_NAME"
		echo "listen = { tcp = [ \"127.0.0.1:$port\" ]; unix = [ \"$sock\" ];${LISTEN_KEYS:+ $LISTEN_KEYS} };"
		[[ -z $CONF_EXTRA ]] || echo "$CONF_EXTRA"
		echo "cache = { size = \"64M\"; page_size = \"4K\"; };"
		echo "control = { socket = \"${sock%/*}/control.sock\"; };"
		echo "exports = ("
		for i in "${!_EXPORTS[@]}"; do
			if (( i + 1 < ${#_EXPORTS[@]} )); then
				echo "${_EXPORTS[$i]},"
			else
				echo "${_EXPORTS[$i]}"
			fi
		done
		echo ");"
	} >"$file"
}

# uri_unix [EXPORT [SOCKET]] / uri_tcp [EXPORT [PORT]]: NBD URIs of an export.
uri_unix() { printf 'nbd+unix:///%s?socket=%s' "${1:-disk0}" "${2:-$SOCK}"; }
uri_tcp() { printf 'nbd://127.0.0.1:%s/%s' "${2:-$PORT}" "${1:-disk0}"; }

# can_connect SOCKET PORT: true if both listeners accept a connection.
can_connect() {
	python3 - "$1" "$2" <<'EOF'
import socket, sys
try:
    if sys.argv[1]:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(1)
        s.connect(sys.argv[1])
        s.close()
    if sys.argv[2]:
        s = socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=1)
        s.close()
except OSError:
    sys.exit(1)
EOF
}

# track_wbd PID [LOG]: record a wbd the test started in the background
# itself (through a wrapper that execs it, under systemd-socket-activate...),
# as spawn_wbd does: stopped at exit and its exit status checked (see the
# top of this file); LOG is scanned for sanitizer reports.
track_wbd() {
	_PIDS+=("$1")
	_WBD_PIDS+=("$1")
	_WBD_STATE[$1]=run
	[[ -z ${2:-} ]] || _LOGS+=("$2")
}

# spawn_wbd CONF LOG [ARGS...]: start "$WBD -f -c CONF ARGS" in the
# background, its stdout and stderr to LOG; sets SPAWNED_PID (recorded as by
# track_wbd).
SPAWNED_PID=
spawn_wbd() {
	local conf=$1 logf=$2
	shift 2
	# The built-in control socket, /run/wbd/control.sock, is the packaged
	# service's: a test that took it would show up in its wbctl status,
	# or stop it from starting.
	grep -Eq '^[[:space:]]*control[[:space:]]*=' "$conf" ||
		fail "$conf names no control socket: wbd would take the packaged /run/wbd/control.sock"
	! grep -q '/run/wbd/' "$conf" ||
		fail "$conf uses /run/wbd/, the packaged service's directory"
	_LOGS+=("$logf")
	"$WBD" -f -c "$conf" "$@" >>"$logf" 2>&1 &
	SPAWNED_PID=$!
	track_wbd "$SPAWNED_PID"
}

# wait_ready PID SOCKET PORT LOG: wait (bounded) until the daemon accepts on
# both listeners and LOG has its ready line; fail with its log if it exits
# or takes too long.
wait_ready() {
	_wait_ready "$@" && return 0
	case $? in
	2) fail "wbd exited during start-up (status $EXIT_STATUS); see $4" ;;
	*) fail "wbd did not accept connections within 30 s" ;;
	esac
}

# _wait_ready PID SOCKET PORT [LOG]: 0 ready, 2 the daemon exited
# (EXIT_STATUS set), 3 timed out.  Ready: both listeners accept and, with
# LOG, the daemon has logged "wbd VERSION ready:".  The listeners are bound
# (and the kernel accepts into their backlog) before the exports are set
# up and logged, so a test that reads the log at once could miss them
# under load.
_wait_ready() {
	local pid=$1 sock=$2 port=$3 logf=${4:-} i
	for ((i = 0; i < 300; i++)); do
		if ! proc_alive "$pid"; then
			_reap "$pid"
			return 2
		fi
		if [[ -S $sock ]] && can_connect "$sock" "$port" &&
			{ [[ -z $logf ]] || grep -Eq 'wbd [^ ]+ ready: ' "$logf"; }; then
			return 0
		fi
		sleep 0.1
	done
	return 3
}

# start_wbd [ARGS...]: write_config if $CONF does not exist yet, start the
# daemon on it and wait until it serves; sets WBD_PID.  A port taken between
# free_port and bind is retried with another port.
start_wbd() {
	local attempt rc
	[[ -f $CONF ]] || write_config
	for attempt in 1 2 3; do
		spawn_wbd "$CONF" "$LOG" "$@"
		WBD_PID=$SPAWNED_PID
		rc=0
		_wait_ready "$WBD_PID" "$SOCK" "$PORT" "$LOG" || rc=$?
		case $rc in
		0) [[ -z $RSS_BOUND_MIB ]] || wait_prefaulted
		   return 0 ;;
		2) if ((attempt < 3)) && grep -qi 'address already in use' "$LOG"; then
			log "port $PORT was taken, retrying with another"
			PORT=$(free_port)
			write_config
			continue
		   fi
		   fail "wbd exited during start-up (status $EXIT_STATUS)" ;;
		*) fail "wbd did not accept connections within 30 s" ;;
		esac
	done
}

# wait_prefaulted [PID [LOG]]: wait (30 s at most) until the daemon has
# faulted its cache's memory in (memory.prefault, on by default: its log
# says when, or why not), so that RSS measured after it shows growth, not
# the cache arriving.  start_wbd calls it after rss_bound.
wait_prefaulted() {
	local pid=${1:-$WBD_PID} file=${2:-$LOG} i
	grep -Eq 'prefault *= *false' "$CONF" 2>/dev/null && return 0
	for ((i = 0; i < 300; i++)); do
		grep -q 'memory\.prefault:' "$file" && return 0
		proc_alive "$pid" || return 0
		sleep 0.1
	done
	fail "memory.prefault: nothing in $file after 30 s"
}

# stop_wbd [PID [SIGNAL [SECONDS [STATUS]]]]: signal the daemon (default
# SIGTERM) and wait for it to exit; sets EXIT_STATUS.  Fails if it does not
# exit within SECONDS (default 20), if it had exited before the signal, or
# if it exits with another status than STATUS: by default 0 after SIGTERM
# or SIGINT, 137 after SIGKILL; other signals must name the status.
stop_wbd() {
	local pid=${1:-$WBD_PID} sig=${2:-TERM} secs=${3:-20} want=${4:-} alive=1
	sig=${sig#SIG}
	if [[ -z $want ]]; then
		case $sig in
		TERM | INT) want=0 ;;
		KILL) want=137 ;;
		*) fail "stop_wbd: give the exit status expected after SIG$sig" ;;
		esac
	fi
	proc_alive "$pid" || alive=
	kill -s "$sig" "$pid" 2>/dev/null || true
	wait_exit "$pid" "$secs" ||
		fail "wbd (pid $pid) still running ${secs}s after SIG$sig"
	[[ -n $alive ]] ||
		fail "wbd (pid $pid) had exited, with $(describe_status "$EXIT_STATUS"), before it was sent SIG$sig"
	[[ $EXIT_STATUS == "$want" ]] ||
		fail "wbd (pid $pid) exited with $(describe_status "$EXIT_STATUS") after SIG$sig, expected $want"
}

# assert_alive [PID]: the daemon is still running.
assert_alive() {
	proc_alive "${1:-$WBD_PID}" || fail "wbd (pid ${1:-$WBD_PID}) is no longer running"
}

# rss_bound MIB: set RSS_BOUND_MIB, the growth of the daemon's RSS a test
# allows: MIB, or twice that under AddressSanitizer, whose quarantine
# (freed memory kept back, 256 MiB by default) is then cut to 4 MiB so
# that RSS shows what is live.  Call before start_wbd.
RSS_BOUND_MIB=
rss_bound() {
	RSS_BOUND_MIB=$1
	if [[ $(ldd "$WBD" 2>/dev/null) == *libasan* ]]; then
		export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4
		RSS_BOUND_MIB=$(($1 * 2))
	fi
}

# Sanitizer reports (ASan, LSan, UBSan) in any daemon log fail the test.
SANITIZER_RE='ERROR: (Address|Leak|Memory|Thread)Sanitizer|runtime error:|SUMMARY: [A-Za-z]*Sanitizer|WARNING: ThreadSanitizer'

check_logs_clean() {
	local l
	for l in "${_LOGS[@]}"; do
		if [[ -f $l ]] && grep -Eq "$SANITIZER_RE" "$l"; then
			printf 'FAIL: %s: sanitizer report in %s:\n' "$TEST_NAME" "$l" >&2
			cat "$l" >&2
			return 1
		fi
	done
	return 0
}

# _stop_wbds SECS: stop every daemon the test started and has not waited for
# itself.  One that has exited already did so on its own: an error whatever
# its status.  The others are sent SIGTERM together, and must exit with
# status 0 within SECS (else SIGKILL, an error too).  The errors are kept
# in _WBD_ERRORS for _cleanup.
_stop_wbds() {
	local secs=$1 pid live=()
	for pid in "${_WBD_PIDS[@]}"; do
		[[ ${_WBD_STATE[$pid]} == run ]] || continue
		if proc_alive "$pid"; then
			kill -TERM "$pid" 2>/dev/null
			live+=("$pid")
		else
			_reap "$pid"
			_WBD_ERRORS+=("wbd (pid $pid) exited on its own, with $(describe_status "$EXIT_STATUS"), before the test stopped it")
		fi
	done
	for pid in "${live[@]}"; do
		if ! wait_exit "$pid" "$secs"; then
			kill -KILL "$pid" 2>/dev/null
			_reap "$pid"
			_WBD_ERRORS+=("wbd (pid $pid) ignored SIGTERM for $secs s at the end of the test; killed")
		elif ((EXIT_STATUS != 0)); then
			_WBD_ERRORS+=("wbd (pid $pid) exited with $(describe_status "$EXIT_STATUS") on SIGTERM at the end of the test, expected 0")
		fi
	done
}

_cleanup() {
	local rc=$? pid e
	trap - ERR
	set +e
	_stop_wbds 20
	for pid in "${_PIDS[@]}"; do
		[[ -z ${_WBD_STATE[$pid]:-} ]] || continue
		proc_alive "$pid" && kill -TERM "$pid" 2>/dev/null
	done
	for pid in "${_PIDS[@]}"; do
		[[ -z ${_WBD_STATE[$pid]:-} ]] || continue
		if ! wait_exit "$pid" 20; then
			printf '%s: pid %s ignored SIGTERM for 20 s; killing it\n' \
				"$TEST_NAME" "$pid" >&2
			kill -KILL "$pid" 2>/dev/null
			wait "$pid" 2>/dev/null
			((rc == 0)) && rc=1
		fi
	done
	for e in "${_WBD_ERRORS[@]}"; do
		printf 'FAIL: %s: %s\n' "$TEST_NAME" "$e" >&2
		rc=1
	done
	check_logs_clean || rc=1
	if ((rc != 0 && rc != 77)); then
		_show_logs
	fi
	if [[ -n ${KEEP_TMP:-} ]]; then
		printf '%s: kept %s\n' "$TEST_NAME" "$T" >&2
	else
		rm -rf "$T"
	fi
	exit "$rc"
}
trap _cleanup EXIT

# --- cache and writeback helpers --------------------------------------------

# add_export_mode NAME SIZE CACHE_MODE [BACKING]: add a read-write export with
# the given cache_mode (writeback, writethrough, writethrough-until-flush).
add_export_mode() {
	local name=$1 size=$2 cmode=$3 backing=${4:-$T/$1.img}
	_EXPORTS+=("  { name = \"$name\"; backing = \"$backing\"; size = \"$size\"; readonly = false; cache_mode = \"$cmode\"; }")
}

# write_cache_config CACHE_SIZE WRITEBACK_KEYS [PAGE_SIZE]: as write_config,
# with "cache = { size = CACHE_SIZE; ... }" and "writeback = { WRITEBACK_KEYS }"
# (keys as written in wbd.conf, e.g. 'dirty_writeback_centisecs = 0;').
write_cache_config() {
	local size=$1 wb=$2 ps=${3:-4K}
	write_config
	sed -i "s|^cache = .*|cache = { size = \"$size\"; page_size = \"$ps\"; };\nwriteback = { $wb };|" "$CONF"
}

# io_uring_usable: does this kernel give this process an io_uring
# (io_uring_setup)?  Where it does, writeback.io_engine = "io_uring" is what
# wbd uses; where not (an old kernel, kernel.io_uring_disabled, a seccomp
# filter), it falls back to pwrite.
io_uring_usable() {
	python3 -c 'import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.syscall(425, 2, (ctypes.c_char * 120)())
if fd < 0:
    sys.exit(1)
os.close(fd)'
}

# dev_majmin FILE: the MAJ:MIN of the filesystem holding FILE, as wbd names
# the writeback device (and its flush-MAJ:MIN threads).
dev_majmin() {
	local dev
	dev=$(stat -c '%d' "$1")
	printf '%d:%d\n' $(( ((dev >> 8) & 0xfff) | ((dev >> 32) & ~0xfff) )) \
		$(( (dev & 0xff) | ((dev >> 12) & ~0xff) ))
}

# thread_names PID: the names of PID's threads, one a line.
thread_names() {
	cat /proc/"$1"/task/*/comm 2>/dev/null || true
}

# count_threads PID NAME: how many of PID's threads are called NAME.
count_threads() {
	thread_names "$1" | grep -cxF -- "$2" || true
}

# vmrss_kib PID: the resident set size of PID in KiB.
vmrss_kib() {
	awk '/^VmRSS:/ { print $2 }' /proc/"$1"/status
}

# start_fuse_file DIR NBDKIT_ARGS...: make DIR/disk a file on a FUSE mount
# (nbdfuse) whose reads, writes and fsyncs go to `nbdkit -s NBDKIT_ARGS...`,
# and set FUSE_FILE to it.  Skips the test without nbdfuse, nbdkit or FUSE.
# At exit the daemons are stopped before the file goes away.
FUSE_FILE=
_FUSE_PID=
start_fuse_file() {
	local dir=$1 i
	shift
	need nbdfuse nbdkit
	[[ -c /dev/fuse && -w /dev/fuse ]] || skip "/dev/fuse is not usable"
	mkdir -p "$dir"
	nbdfuse "$dir/disk" --command nbdkit -s "$@" >"$T/nbdfuse.log" 2>&1 &
	_FUSE_PID=$!
	trap _stop_slow_file_then_cleanup EXIT
	for ((i = 0; i < 100; i++)); do
		[[ -f $dir/disk ]] && break
		proc_alive "$_FUSE_PID" || skip "nbdfuse failed: $(cat "$T/nbdfuse.log")"
		sleep 0.1
	done
	[[ -f $dir/disk ]] || skip "nbdfuse did not mount $dir within 10 s"
	FUSE_FILE=$dir/disk
}

# start_slow_file DIR SIZE WRITE_DELAY: make DIR/disk a file whose writes
# are slow -- an nbdkit memory disk of SIZE behind its delay filter
# (delay-write=WRITE_DELAY, e.g. "5ms", per write), mounted with nbdfuse --
# and set SLOW_FILE to it.  As start_fuse_file.
SLOW_FILE=
start_slow_file() {
	start_fuse_file "$1" --filter=delay memory "$2" delay-write="$3"
	SLOW_FILE=$FUSE_FILE
}

# start_failing_file DIR WRITES TRIMS: make DIR/disk a file (FUSE_FILE, as
# start_fuse_file) on a 16 MiB nbdkit memory disk behind its error filter,
# whose writes fail with EIO while the file WRITES exists, and whose trims
# and zeroings fail while TRIMS exists (the same path for both fails them
# all at once).  A log on it fails when the test says so.
start_failing_file() {
	start_fuse_file "$1" --filter=error memory 16M error=EIO \
		error-pwrite-rate=100% "error-pwrite-file=$2" \
		error-trim-rate=100% "error-trim-file=$3" \
		error-zero-rate=100% "error-zero-file=$3"
}

# log_has_superblock [LOG]: either of the write log's two superblock slots
# (LOG, default $T/disk0.wal) starts with the log's magic, read past the
# kernel's cache (as after a reboot: a write that failed may have left its
# data there).
log_has_superblock() {
	"$PYTHON" -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
sys.exit(0 if b"WBDLOG01" in (os.pread(fd, 8, 0), os.pread(fd, 8, 4096)) else 1)' "${1:-$T/disk0.wal}"
}

# stop_started_daemons [SECS]: stop every wbd this test started, checking
# how each exits as _cleanup does (up to SECS each, default 30), then
# SIGTERM the other processes and wait for them (_cleanup deals with the
# stubborn), so that what they stand on (a FUSE mount, a loop device, a
# remote) can go after them.
stop_started_daemons() {
	local pid secs=${1:-30}
	_stop_wbds "$secs"
	for pid in "${_PIDS[@]}"; do
		[[ -z ${_WBD_STATE[$pid]:-} ]] || continue
		proc_alive "$pid" && kill -TERM "$pid" 2>/dev/null
	done
	for pid in "${_PIDS[@]}"; do
		[[ -z ${_WBD_STATE[$pid]:-} ]] || continue
		wait_exit "$pid" "$secs" || true
	done
}

_stop_slow_file_then_cleanup() {
	local rc=$? pid
	trap - ERR
	set +e
	stop_started_daemons
	if [[ -n $_FUSE_PID ]] && proc_alive "$_FUSE_PID"; then
		kill -TERM "$_FUSE_PID" 2>/dev/null
		wait_exit "$_FUSE_PID" 10 || kill -KILL "$_FUSE_PID" 2>/dev/null || true
	fi
	(exit "$rc")
	_cleanup
}

# attach_loop VAR FILE [LOSETUP_OPTIONS...]: set VAR to a loop device
# over FILE (losetup -f --show), detached when the test ends, once every
# process it started is stopped (and a FUSE mount with them): 1 if
# losetup fails; skips (77) when not root or without losetup.
_LOOPDEVS=()
attach_loop() {
	local var=$1 file=$2 dev
	shift 2
	[[ $(id -u) == 0 ]] || skip "needs root to set up a loop device"
	command -v losetup >/dev/null || skip "losetup not found"
	dev=$(losetup -f --show "$@" "$file" 2>/dev/null) || return 1
	_LOOPDEVS+=("$dev")
	trap _detach_loops_then_cleanup EXIT
	printf -v "$var" '%s' "$dev"
}

_detach_loops_then_cleanup() {
	local rc=$? dev
	trap - ERR
	set +e
	stop_started_daemons
	for dev in "${_LOOPDEVS[@]}"; do
		losetup -d "$dev" 2>/dev/null
	done
	(exit "$rc")
	_stop_slow_file_then_cleanup
}

# reads_back NAME OFFSET_MIB [EXPORT]: wbd reads the file $T/NAME at
# OFFSET_MIB MiB of EXPORT (default disk0).
reads_back() {
	"$PYTHON" - "$(uri_unix "${3:-disk0}")" "$T/$1" $(($2 << 20)) <<'PY'
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
want = open(sys.argv[2], "rb").read()
got = h.pread(len(want), int(sys.argv[3]))
h.shutdown()
sys.exit(0 if got == want else 1)
PY
}

# write_log_state STATE BELOW [LOG]: write the state file STATE as
# journal_mark_stale does: every record of LOG (its uuid read from its
# superblock; without LOG, a uuid no log has) below sequence BELOW is
# stale.
write_log_state() {
	"$PYTHON" - "$@" <<'PY' || fail "see above"
import sys
state, below = sys.argv[1], int(sys.argv[2])
uuid = "5eed" * 8
if len(sys.argv) > 3:
    with open(sys.argv[3], "rb") as f:
        sb = f.read(8192)
    slots = [sb[o:o + 4096] for o in (0, 4096) if sb[o:o + 8] == b"WBDLOG01"]
    if not slots:
        sys.exit("FAIL: no log in %s" % sys.argv[3])
    uuid = slots[0][24:40].hex()
def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF
text = "wbd write log state 1\nuuid %s\nstale_below %d\n" % (uuid, below)
text += "crc32c %08x\n" % crc32c(text.encode())
open(state, "w").write(text)
PY
}

# --- the kernel's NBD client --------------------------------------------

# kernel_nbd_unusable: print why /dev/nbd0 and nbd-client cannot be used
# here and succeed; fail, printing nothing, if they can.
kernel_nbd_unusable() {
	if ! command -v nbd-client >/dev/null 2>&1; then
		echo "nbd-client is not installed"
	elif [[ $(id -u) != 0 ]]; then
		echo "not root"
	elif [[ ! -b /dev/nbd0 ]] && ! { command -v modprobe >/dev/null 2>&1 &&
	    modprobe nbd 2>/dev/null && sleep 0.5 && [[ -b /dev/nbd0 ]]; }; then
		echo "/dev/nbd0 does not exist and the nbd module cannot be loaded here"
	elif [[ -e /sys/block/nbd0/pid ]]; then
		echo "/dev/nbd0 is in use"
	else
		return 1
	fi
}

# --- block status -------------------------------------------------------

# map_flags URI OFFSET [CONTEXT]: the flags (a number) that `nbdinfo
# --map[=CONTEXT]` reports for the byte at OFFSET (default context
# base:allocation: 0 data, 1 hole, 2 zero, 3 hole and zero).  Fails the
# test if nbdinfo does.
map_flags() {
	local out
	out=$(nbdinfo --map${3:+=$3} "$1") || fail "nbdinfo --map${3:+=$3} $1 failed"
	awk -v o="$2" '$1 <= o && o < $1 + $2 { print $3; f = 1; exit }
		END { if (!f) print "none" }' <<<"$out"
}

# expect_map URI CONTEXT OFFSET FLAGS WHAT: map_flags gives FLAGS there.
expect_map() {
	local got
	got=$(map_flags "$1" "$3" "$2")
	[[ $got == "$4" ]] || fail "$5: $2 at offset $3 is $got, expected $4 ($(nbdinfo --map="$2" "$1" | head -n 20 | tr '\n' ';'))"
}
