# SPDX-License-Identifier: GPL-2.0-or-later
# lib-remote.sh - helpers for the remote-backing tests: wbd exports whose
# backing device is an nbdkit started by the test on a Unix socket in $T.
# Sourced after ../integration/lib.sh (which it sources itself).
#
# At exit every wbd is stopped first (so it can write its dirty data back
# while the servers still run), its exit status checked as lib.sh's
# cleanup does (a wbd that exited on its own, or not with 0 on SIGTERM,
# fails the test), then every nbdkit, then lib.sh's cleanup.

: "${SRCDIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
source "$SRCDIR/../integration/lib.sh"

need nbdkit

_KIT_PIDS=()

# start_nbdkit NAME [NBDKIT ARGS...]: start "nbdkit -f -U $T/NAME.sock
# ARGS" in the background, log in $T/NAME.log; sets KIT_PID and KIT_SOCK
# (and KIT_ARGS, NAME and ARGS, for restart_kit_after_kill).  Fails if
# the socket does not appear within 10 s.
KIT_PID=
KIT_SOCK=
KIT_ARGS=()
start_nbdkit() {
	local name=$1 i
	KIT_ARGS=("$@")
	shift
	KIT_SOCK=$T/$name.sock
	rm -f "$KIT_SOCK"
	nbdkit -f -U "$KIT_SOCK" "$@" >>"$T/$name.log" 2>&1 &
	KIT_PID=$!
	_KIT_PIDS+=("$KIT_PID")
	for ((i = 0; i < 100; i++)); do
		[[ -S $KIT_SOCK ]] && return 0
		proc_alive "$KIT_PID" || fail "nbdkit $* exited: $(cat "$T/$name.log")"
		sleep 0.1
	done
	fail "nbdkit $* did not create $KIT_SOCK within 10 s"
}

# restart_kit_after_kill: after a SIGKILL of wbd, stop the last nbdkit
# started ($KIT_PID) and start it again with the same arguments.  A
# client killed while its requests sleep in a filter (delay, rate) can
# make nbdkit 1.32 abort ("connections.c: raw_send_socket: Assertion
# `sock >= 0' failed": a reply sent on the connection the client
# closed), and whether it does is a race; so the tests that kill wbd
# under such a filter always start a fresh nbdkit on the same file.
# What the killed nbdkit wrote is in that file, which is the remote's
# state after the crash either way.
restart_kit_after_kill() {
	kill -TERM "$KIT_PID" 2>/dev/null || true
	wait_exit "$KIT_PID" 10 || fail "nbdkit (pid $KIT_PID) still running 10 s after SIGTERM"
	start_nbdkit "${KIT_ARGS[@]}"
}

# kit_uri SOCKET [EXPORT]: the URI of an nbdkit export on SOCKET.
kit_uri() { printf 'nbd+unix:///%s?socket=%s' "${2:-}" "$1"; }

# add_remote_export NAME URI [MORE KEYS]: an export backed by URI.
add_remote_export() {
	_EXPORTS+=("  { name = \"$1\"; backing = \"$2\"; ${3:-} }")
}

# add_remote_settings 'KEY = V; ...': a remote = { } group in $CONF
# (call after write_config or write_cache_config).
add_remote_settings() {
	echo "remote = { $1 };" >>"$CONF"
}

# reload_remote: SIGHUP wbd and wait until the log says its remote
# settings were applied.
reload_remote() {
	local i
	kill -HUP "$WBD_PID"
	for ((i = 0; i < 50; i++)); do
		grep -q 'reload: .*remote settings applied' "$LOG" && return 0
		sleep 0.1
	done
	fail "the reload did not apply the remote settings: $(grep reload "$LOG")"
}

# remote_field NAME: the first remote device's remote.NAME in `wbctl
# status --json`, as Python prints it (True, False, numbers).
remote_field() {
	remote_wbctl status --json | "$PYTHON" -c 'import json, sys
d = [d for d in json.load(sys.stdin)["devices"] if d["remote"]][0]
print(d["remote"][sys.argv[1]])' "$1"
}

# wait_remote_field NAME VALUE: wait up to 5 s until remote_field NAME
# prints VALUE; false if it does not.
wait_remote_field() {
	local i
	for ((i = 0; i < 50; i++)); do
		[[ $(remote_field "$1") == "$2" ]] && return 0
		sleep 0.1
	done
	return 1
}

# link_field NAME: the first remote device's link.NAME in `wbctl status
# --json` (the link as writeback measures it).
link_field() {
	remote_wbctl status --json | "$PYTHON" -c 'import json, sys
d = [d for d in json.load(sys.stdin)["devices"] if d["remote"]][0]
print(d["link"][sys.argv[1]])' "$1"
}

# need_delay_filter: bench/net/delay-filter.c (a round trip on every
# request, FLUSH included: rtt=TIME), built as the benchmark builds it,
# into $T/netdelay.so; skips without nbdkit's filter header.
need_delay_filter() {
	need pkg-config
	CC=${CC:-cc}
	need "$CC"
	pkg-config --exists nbdkit ||
		skip "nbdkit's filter header is missing: nbdkit-plugin-dev is not installed (scripts/install-deps.sh installs it)"
	# shellcheck disable=SC2046  # pkg-config's flags, split
	"$CC" -std=c17 -O2 -Wall -Wextra -Werror -shared -fPIC \
		$(pkg-config --cflags nbdkit) -o "$T/netdelay.so" \
		"$SRCDIR/../../bench/net/delay-filter.c" ||
		fail "the delay filter does not build"
}

# flush_until_ok [EXPORT]: a FLUSH through wbd, tried up to 3 times on
# one connection (the first may find a dead connection to the remote:
# EIO, a failure reported); fails the test if none succeeds.  A FLUSH that
# succeeds must mean the data is on the remote's stable store.
flush_until_ok() {
	"$PYTHON" - "$(uri_unix "${1:-disk0}")" <<'PY' || fail "see above"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
for attempt in range(3):
    try:
        h.flush()
        break
    except nbd.Error as e:
        print("FLUSH %d: %s" % (attempt + 1, e))
else:
    sys.exit("FAIL: no FLUSH succeeded")
h.shutdown()
PY
}

# wait_clean SECONDS: wait until the cache holds nothing dirty.
wait_clean() {
	local i dirty
	for ((i = 0; i < $1 * 10; i++)); do
		dirty=$(remote_wbctl status --json | "$PYTHON" -c 'import json, sys
c = json.load(sys.stdin)["cache"]
print(c["dirty_bytes"] + c["writeback_bytes"])')
		((dirty == 0)) && return 0
		sleep 0.1
	done
	fail "still $dirty bytes dirty after $1 s"
}

# --- an ordered write log's epochs (epochs.py) ------------------------

# jfield KEY...: the first export's journal.KEY in `wbctl status --json`
# (KEY may name a nested field: replay.bytes), each as Python prints it
# (True, False, numbers), on one line.
jfield() {
	remote_wbctl status --json | "$PYTHON" -c 'import json, sys
j = json.load(sys.stdin)["exports"][0]["journal"]
def get(k):
    o = j
    for p in k.split("."):
        o = o[p]
    return o
print(" ".join(str(get(k)) for k in sys.argv[1:]))' "$@"
}

# epochs_checker EPOCHS: one epochs.py (serve) for every sample's check,
# a coprocess (CHECK) for the rest of the test.
epochs_checker() {
	coproc CHECK { exec python3 "$SRCDIR/epochs.py" serve "$1"; }
}

# sample: stop the remote ($KIT_PID, SIGSTOP), copy its first 256 blocks
# ($T/remote.img) to $T/sample.img, let it go on (SIGCONT), and have the
# checker judge the copy: sets K, the epoch it is at (epochs before K
# whole, a part of K).  Fails, keeping the copy as $T/bad-sample.img, if
# the copy is at no epoch, or K went back since the last sample.  Counts
# SAMPLES; SEEN_K has every K seen.
SAMPLES=0
LAST_K=0
K=0
declare -A SEEN_K=()
sample() {
	local w state why
	kill -STOP "$KIT_PID"
	for ((w = 0; w < 200; w++)); do
		state=$(sed 's/^.*) \(.\).*/\1/' "/proc/$KIT_PID/stat")
		[[ $state == [Tt] ]] && break
		sleep 0.005
	done
	head -c $((256 * 4096)) "$T/remote.img" >"$T/sample.img"
	kill -CONT "$KIT_PID"
	SAMPLES=$((SAMPLES + 1))
	echo "$T/sample.img" >&"${CHECK[1]}"
	read -r K why <&"${CHECK[0]}" || fail "the checker (epochs.py serve) died"
	if [[ $K == FAIL ]]; then
		cp "$T/sample.img" "$T/bad-sample.img"
		fail "sample $SAMPLES of the remote: $why"
	fi
	((K >= LAST_K)) ||
		fail "sample $SAMPLES of the remote went back from epoch $LAST_K to $K: an older epoch applied again"
	LAST_K=$K
	SEEN_K[$K]=1
}

# stop_kit PID [SIGNAL]: stop one nbdkit and wait for it.
stop_kit() {
	kill -s "${2:-TERM}" "$1" 2>/dev/null || true
	wait_exit "$1" 10 || fail "nbdkit (pid $1) still running 10 s after SIG${2:-TERM}"
}

# remote_read SOCKET OFFSET LENGTH FILE: read from nbdkit directly.
remote_read() {
	"$PYTHON" - "$(kit_uri "$1")" "$2" "$3" "$4" <<'PY'
import nbd, sys
uri, off, n, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
h = nbd.NBD()
h.connect_uri(uri)
with open(out, "wb") as f:
    pos = 0
    while pos < n:
        k = min(n - pos, 8 << 20)
        f.write(h.pread(k, off + pos))
        pos += k
h.shutdown()
PY
}

# write_scattered_pages URI FILE SEED COUNT MIB STEP [flush]: write COUNT
# random 4K pages of the first MIB MiB, every STEP-th page (2: no two
# touch), 32 in flight; then a FLUSH if asked.  FILE gets the MIB MiB
# image they make (zeros elsewhere, as a fresh nbdkit memory disk).
write_scattered_pages() {
	"$PYTHON" - "$@" <<'PY'
import nbd, os, random, sys
uri, out = sys.argv[1:3]
seed, count, mib, step = map(int, sys.argv[3:7])
random.seed(seed)
pages = random.sample(range(0, (mib << 20) // 4096, step), count)
h = nbd.NBD()
h.connect_uri(uri)
img = bytearray(mib << 20)
for p in pages:
    buf = os.urandom(4096)
    img[p * 4096:(p + 1) * 4096] = buf
    h.aio_pwrite(buf, p * 4096)
    while h.aio_in_flight() > 32:
        h.poll(-1)
while h.aio_in_flight() > 0:
    h.poll(-1)
if sys.argv[7:] == ["flush"]:
    h.flush()
h.shutdown()
open(out, "wb").write(img)
PY
}

# start_drop_proxy TARGET: drop-proxy.py in front of the remote socket
# TARGET; sets PROXY (its socket) and DROP (its control file: drop
# closes every connection, $DROP.stall swallows writes).
start_drop_proxy() {
	PROXY=$T/proxy.sock DROP=$T/drop
	"$PYTHON" "$SRCDIR/drop-proxy.py" "$PROXY" "$1" "$DROP" >"$T/proxy.log" 2>&1 &
	_PIDS+=("$!")
	for ((i = 0; i < 100; i++)); do [[ -S $PROXY ]] && break; sleep 0.1; done
	[[ -S $PROXY ]] || fail "drop-proxy.py did not listen: $(cat "$T/proxy.log")"
}

# wbd_behind_drop_proxy 'REMOTE SETTINGS': nbdkit memory 64M (KIT),
# drop-proxy.py in front of it (start_drop_proxy), export disk0 through
# the proxy, a 256M cache written back only for syncs, and wbd started
# with the remote group given.
wbd_behind_drop_proxy() {
	need_python_nbd
	need_wbctl
	start_nbdkit kit memory 64M
	KIT=$KIT_SOCK
	start_drop_proxy "$KIT"
	add_remote_export disk0 "$(kit_uri "$PROXY")"
	write_cache_config 256M 'dirty_background_ratio = 50; dirty_ratio = 60; dirty_writeback_centisecs = 0;'
	add_remote_settings "$1"
	start_wbd
}

# drop: every connection through the proxy closed, with nothing in
# flight on them and nothing dirty.
drop() {
	wait_clean 30
	(($(link_field writes_in_flight) == 0)) || fail "writes in flight before the drop"
	local before
	before=$(grep -c '^dropped' "$T/proxy.log" || true)
	touch "$DROP"
	for ((i = 0; i < 100; i++)); do
		(($(grep -c '^dropped' "$T/proxy.log") > before)) && break
		sleep 0.1
	done
	log "proxy: $(grep '^dropped' "$T/proxy.log" | tail -n 1)"
	grep -q '^dropped [1-9]' <(grep '^dropped' "$T/proxy.log" | tail -n 1) ||
		fail "the proxy dropped no connection: $(cat "$T/proxy.log")"
	sleep 0.5 # idle, and closed
}

# flush_sampling URI OFFSET FILE SAMPLER: 16 MiB of random data written
# at OFFSET through URI (and into FILE at OFFSET), then `wbctl flush`,
# with the shell function SAMPLER called every 50 ms while it runs and
# once after it.
flush_sampling() {
	local flush
	"$PYTHON" - "$1" "$2" "$3" <<'PY' || fail "writing through wbd failed"
import nbd, os, sys
uri, off, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
h = nbd.NBD()
h.connect_uri(uri)
with open(out, "r+b") as f:
    for i in range(16):
        buf = os.urandom(1 << 20)
        h.pwrite(buf, off + (i << 20))
        f.seek(off + (i << 20))
        f.write(buf)
h.shutdown()
PY
	remote_wbctl flush >"$T/flush.out" 2>&1 &
	flush=$!
	while proc_alive "$flush"; do
		"$4"
		sleep 0.05
	done
	wait "$flush" || fail "wbctl flush failed: $(cat "$T/flush.out")"
	"$4"
}

# --- wbctl and nbdkit's pause filter ------------------------------------

# $WBCTL (meson sets it; by hand it defaults to the build's client/wbctl
# next to $WBD's daemon/).  need_wbctl skips the test without it;
# remote_wbctl ARGS runs it on the control socket write_config names.
: "${WBCTL:=}"
if [[ -z $WBCTL && -x ${WBD%/daemon/wbd}/client/wbctl ]]; then
	WBCTL=${WBD%/daemon/wbd}/client/wbctl
fi
[[ -n $WBCTL && $WBCTL == */* ]] &&
	WBCTL=$(cd "$(dirname "$WBCTL")" && pwd)/$(basename "$WBCTL")
need_wbctl() {
	[[ -n $WBCTL && -x $WBCTL ]] || skip "wbctl not found (set WBCTL)"
}
remote_wbctl() {
	"$WBCTL" -s "$T/control.sock" "$@"
}

# export_device NAME: the writeback device (MAJ:MIN) wbd's log gives the
# export NAME at start-up.
export_device() {
	sed -n "s/.*export \"$1\": .*, device \([0-9]*:[0-9]*\)\$/\1/p" "$LOG" | tail -1
}

# need_pause_filter: skip unless nbdkit has its pause filter.
need_pause_filter() {
	nbdkit --filter=pause null --dump-plugin >/dev/null 2>&1 ||
		skip "nbdkit's pause filter (nbdkit-pause-filter) is not installed"
}

# pause_ctl SOCKET p|r [SECONDS]: send a command to a pause filter's
# control socket and wait (default 30 s) for its upper-case echo, which
# for "p" comes once the requests already received are done.
pause_ctl() {
	python3 - "$1" "$2" "${3:-30}" <<'PY'
import socket, sys
path, cmd, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
s = socket.socket(socket.AF_UNIX)
s.settimeout(secs)
try:
    s.connect(path)
    s.sendall(cmd.encode())
    r = s.recv(1)
except OSError as e:
    sys.exit("pause control %s %r: %s" % (path, cmd, e))
if r != cmd.upper().encode():
    sys.exit("pause control %s %r: answered %r" % (path, cmd, r))
PY
}

# use_pause_control SOCKET: wait (up to 5 s) for the control socket of a
# pause filter started with pause-control=SOCKET, and have the exit resume
# it before the cleanup (wbd writes back at shutdown, which a paused
# remote would hold).
_PAUSE_SOCK=
use_pause_control() {
	local i
	_PAUSE_SOCK=$1
	for ((i = 0; i < 50; i++)); do
		[[ -S $_PAUSE_SOCK ]] && break
		sleep 0.1
	done
	[[ -S $_PAUSE_SOCK ]] || fail "the pause filter made no control socket"
	trap _resume_then_cleanup EXIT
}

_resume_then_cleanup() {
	local rc=$?
	trap - ERR
	set +e
	pause_ctl "$_PAUSE_SOCK" r 5 >/dev/null 2>&1
	(exit "$rc")
	_remote_cleanup
}

# start_conn_volatile [ARG...]: conn-volatile.py (a multi-conn disk that
# drops a connection's unflushed writes when it closes) as nbdkit KIT,
# 16 MiB, its stable store in $STORE; ARGs go to the plugin.  Sets MiB.
start_conn_volatile() {
	need_python_nbd
	need_wbctl
	nbdkit python --version >/dev/null 2>&1 ||
		skip "nbdkit's python plugin (nbdkit-plugin-python) is not installed"
	MiB=$((1 << 20))
	STORE=$T/remote.img
	start_nbdkit kit python "$SRCDIR/conn-volatile.py" file="$STORE" \
		size=$((16 * MiB)) "$@"
}

# write_file_at OFF FILE [EXPORT]: FILE's bytes at OFF through wbd's
# EXPORT (disk0), no FLUSH.
write_file_at() {
	"$PYTHON" - "$(uri_unix "${3:-disk0}")" "$1" "$2" <<'PY' || fail "writing through wbd"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(open(sys.argv[3], "rb").read(), int(sys.argv[2]))
h.shutdown()
PY
}

# on_stable_store STORE FILE OFFSET ...: each FILE's bytes are at its
# OFFSET in STORE (a remote's stable store, conn-volatile.py's file),
# after a FLUSH through wbd succeeded; fails saying how many blocks are
# not.
on_stable_store() {
	"$PYTHON" - "$@" <<'PY' || fail "see above"
import sys
img = open(sys.argv[1], "rb").read()
args = sys.argv[2:]
for path, off in zip(args[0::2], args[1::2]):
    data, off = open(path, "rb").read(), int(off)
    got = img[off:off + len(data)]
    if got != data:
        bad = sum(got[i:i + 4096] != data[i:i + 4096]
                  for i in range(0, len(data), 4096))
        sys.exit("FAIL: after a FLUSH through wbd succeeded, %d of %d blocks "
                 "at %d are not on the remote's stable store"
                 % (bad, len(data) // 4096, off))
PY
}

# write_half_pages URI OFFSET MIB SEED OUT: MIB of 4K pages, every other
# page of the 2 MIB from OFFSET in a random order (SEED), 32 in flight,
# no FLUSH; the 2 MIB's image (zeros between) into OUT.
write_half_pages() {
	"$PYTHON" - "$@" <<'PY'
import nbd, os, random, sys
uri, off, mib, seed, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
random.seed(seed)
pages = random.sample(range(0, (mib << 21) // 4096, 2), (mib << 20) // 4096)
h = nbd.NBD()
h.connect_uri(uri)
img = bytearray(mib << 21)
for p in pages:
    buf = os.urandom(4096)
    img[p * 4096:(p + 1) * 4096] = buf
    h.aio_pwrite(buf, off + p * 4096)
    while h.aio_in_flight() > 32:
        h.poll(-1)
while h.aio_in_flight() > 0:
    h.poll(-1)
h.shutdown()
open(out, "wb").write(img)
PY
}

_remote_cleanup() {
	local rc=$? pid
	trap - ERR
	set +e
	stop_started_daemons 40
	for pid in "${_KIT_PIDS[@]}"; do
		proc_alive "$pid" && kill -TERM "$pid" 2>/dev/null
	done
	for pid in "${_KIT_PIDS[@]}"; do
		wait_exit "$pid" 10 || { kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
	done
	(exit "$rc")
	_cleanup
}
trap _remote_cleanup EXIT
