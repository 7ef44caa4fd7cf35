#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A power cut of the write log's own device (issue 28): the log is the file
# of an nbdfuse mount of nbdkit's file plugin behind powercut-filter.c, a
# device that keeps what was written and not yet flushed apart and forgets
# it when the power goes (the cut file appears).  The remote, an nbdkit
# file plugin on a Unix socket, runs through the whole test and never
# loses anything.  Each cycle:
#   - mount the log, start wbd on it (journal size 0, mode on-flush): the
#     start replays what the last cycle's log kept;
#   - read every block through wbd and check the last cycle (below);
#   - a FLUSH-heavy client writes whole 4 KiB blocks (1 to 4 at a time,
#     among 256, each filled with a tag: cycle, write number, block) and
#     FLUSHes every 1 to 4 writes, noting each write before it sends it
#     and each FLUSH once it is answered;
#   - after 0.2 to 1.5 s the power is cut and wbd killed with SIGKILL at
#     once; the log is unmounted.  Three kinds of cut, in turn:
#       1. the device forgets all it had not flushed: its file holds only
#          what was flushed;
#       2. the cut waits for the log's next FLUSH with writes to flush (a
#          batch written, its fdatasync under way: the worst moment), and
#          each 4 KiB not flushed reached the medium anyway with a chance
#          of one in two, so that the batch may be there in part, with
#          holes; wbd is killed once the filter says it cut;
#       3. as 2, the device forgetting all it had not flushed.
# The check, per block: it holds one tag throughout (never a torn mix of
# two writes, never another block's), and that tag is the last write to
# the block before the last FLUSH answered (every FLUSHed byte; with no
# such write, what the block read at the start of the cycle) or a write
# after it (a write never flushed may or may not survive) -- nothing
# older, nothing else.  50 cycles (WBD_POWERCUT_CYCLES), a line each.
# Then 20 more (WBD_POWERCUT_ONWRITE_CYCLES) with the log in mode
# "on-write", where every write answered is durable on its own: the
# client notes each answered write as it notes an answered FLUSH, so the
# check becomes "the last write answered, or a later one".  At the end
# wbd is stopped with SIGTERM (it drains, exits 0) and the remote file
# must hold what wbd last read back.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need nbdfuse gcc pkg-config
pkg-config --exists nbdkit || skip "nbdkit's development files (nbdkit-plugin-dev) are not installed"
[[ -c /dev/fuse && -w /dev/fuse ]] || skip "/dev/fuse is not usable"

FLUSH_CYCLES=${WBD_POWERCUT_CYCLES:-50}
CYCLES=$((FLUSH_CYCLES + ${WBD_POWERCUT_ONWRITE_CYCLES:-20}))
export POWERCUT_MODE=on-flush
BLOCKS=256
MNT=$T/mnt
WAL=$MNT/log

# shellcheck disable=SC2046 # pkg-config's flags are words
gcc -std=c17 -O2 -Wall -Wextra -Werror -shared -fPIC $(pkg-config --cflags nbdkit) \
	-o "$T/powercut.so" "$SRCDIR/powercut-filter.c" ||
	fail "powercut-filter.c does not build"

# mount_log KEEP AT: mount the log's device, as the file $WAL; at the
# cut, each 4 KiB it has not flushed reaches its medium with a chance of
# KEEP percent; AT is request (cut at once) or flush (at the next FLUSH
# with writes to flush) (powercut-filter.c).  nbdfuse exits once the
# mount is gone (umount_log).
FUSE_PID=
mount_log() {
	local i
	mkdir -p "$MNT"
	nbdfuse "$WAL" --command nbdkit -s --filter="$T/powercut.so" \
		file "$T/log.img" cut="$T/cut" keep="$1" cut-at="$2" \
		>>"$T/nbdfuse.log" 2>&1 &
	FUSE_PID=$!
	_PIDS+=("$FUSE_PID")
	for ((i = 0; i < 100; i++)); do
		[[ -f $WAL ]] && return 0
		proc_alive "$FUSE_PID" || fail "nbdfuse failed: $(cat "$T/nbdfuse.log")"
		sleep 0.1
	done
	fail "nbdfuse did not mount $MNT within 10 s"
}

# umount_log: unmount it and wait for nbdfuse to exit.
umount_log() {
	if command -v fusermount3 >/dev/null 2>&1; then
		fusermount3 -u "$MNT" || fail "fusermount3 -u $MNT failed"
	else
		umount "$MNT" || fail "umount $MNT failed"
	fi
	wait_exit "$FUSE_PID" 10 || fail "nbdfuse still running 10 s after the unmount"
}

# At exit, wbd goes first (lib-remote.sh), then the mount.
_powercut_cleanup() {
	local rc=$?
	trap - ERR
	set +e
	stop_started_daemons 20
	mountpoint -q "$MNT" 2>/dev/null && umount -l "$MNT"
	(exit "$rc")
	_remote_cleanup
}
trap _powercut_cleanup EXIT

# One cycle's client, cycle.py URI BLOCKS STATE PREV_HISTORY [CYCLE
# HISTORY]: read every block through wbd and check it against what STATE
# (every block's tag as read at the start of the last cycle; none: all
# zeroes) and PREV_HISTORY (the last cycle's) allow, print a summary, and
# write the new STATE.  Then, with CYCLE: write and FLUSH until wbd goes
# away, the history (S once checked, W SEQ BLOCK COUNT before each write is
# sent, F after each FLUSH is answered) line-buffered into HISTORY.
cat >"$T/cycle.py" <<'PY'
import json, nbd, os, random, struct, sys, time
uri, blocks, state_f, prev_f = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
MAGIC = 0x54554350      # "PCUT"
state = json.load(open(state_f)) if os.path.exists(state_f) else [None] * blocks
events = []             # (seq, block, count) for a write, None for a FLUSH
prev = 0
if os.path.exists(prev_f):
    prev = int(prev_f.rsplit(".", 1)[1])
    for line in open(prev_f):
        if not line.endswith("\n"):
            break
        w = line.split()
        if w[0] == "W":
            events.append((int(w[1]), int(w[2]), int(w[3])))
        elif w[0] == "F":
            events.append(None)
last_f = max((i for i, e in enumerate(events) if e is None), default=-1)
h = nbd.NBD()
h.connect_uri(uri)
data = h.pread(blocks * 4096, 0)
bad = []
new = []
flushed = kept = 0
for b in range(blocks):
    blk = bytes(data[b * 4096:(b + 1) * 4096])
    unit = blk[:16]
    if blk != unit * 256:
        units = sorted({blk[i:i + 16] for i in range(0, 4096, 16)})
        bad.append("block %d is torn, %d different tags in it: %s" % (
            b, len(units), ", ".join(str(struct.unpack("<IIII", u))
                                     for u in units[:4])))
        continue
    got = None
    if unit != bytes(16):
        magic, c, s, blkno = struct.unpack("<IIII", unit)
        if magic != MAGIC or blkno != b:
            bad.append("block %d holds %s, not a tag of this block" % (
                b, struct.unpack("<IIII", unit)))
            continue
        got = [c, s]
    new.append(got)
    # The last cycle's writes to this block, in order; the last before the
    # last FLUSH answered must be there, or one after it.
    writes = [(i, [prev, e[0]]) for i, e in enumerate(events)
              if e is not None and e[1] <= b < e[1] + e[2]]
    before = [(i, w) for i, w in writes if i < last_f]
    at, must = before[-1] if before else (-1, state[b])
    later = [w for i, w in writes if i > at]
    if got == must:
        flushed += 1 if before else 0
    elif got in later:
        kept += 1
    else:
        bad.append("block %d holds %s; the last FLUSH answered needs %s%s" % (
            b, got, must, ", or one of the later writes %s" % later
            if later else " (no write after it)"))
if bad:
    print("FAIL: after cycle %d's power cut: %s" % (prev, "; ".join(bad[:8])))
    sys.exit(1)
json.dump(new, open(state_f, "w"))
nw = sum(1 for e in events if e is not None)
print("%d writes sent, %d FLUSHes answered; %d blocks hold their last "
      "FLUSHed write, %d a later write" % (
          nw, len(events) - nw, flushed, kept), flush=True)
if len(sys.argv) < 7:
    h.shutdown()
    sys.exit(0)
cycle, hist = int(sys.argv[5]), sys.argv[6]
ack_is_flush = os.environ.get("POWERCUT_MODE") == "on-write"
f = open(hist, "w", buffering=1)
f.write("S\n")
rnd = random.Random()
seq = 0
end = time.monotonic() + 60
try:
    while time.monotonic() < end:
        for _ in range(rnd.randint(1, 4)):
            n = rnd.randint(1, 4)
            b = rnd.randrange(blocks - n + 1)
            seq += 1
            buf = b"".join(struct.pack("<IIII", MAGIC, cycle, seq, b + i) * 256
                           for i in range(n))
            f.write("W %d %d %d\n" % (seq, b, n))
            h.pwrite(buf, b * 4096)
            if ack_is_flush:
                f.write("F\n")     # on-write: durable once answered
        h.flush()
        f.write("F\n")
except nbd.Error:
    pass                # wbd was killed
PY

# start_log_wbd: start wbd and wait for its ready line (the listeners are
# bound before it), more cheaply than start_wbd.
start_log_wbd() {
	local i
	cat "$LOG" >>"$T/wbd-all.log" 2>/dev/null || true
	: >"$LOG"
	spawn_wbd "$CONF" "$LOG"
	WBD_PID=$SPAWNED_PID
	for ((i = 0; i < 600; i++)); do
		grep -q ' ready: ' "$LOG" && return 0
		proc_alive "$WBD_PID" || fail "wbd exited during start-up"
		sleep 0.05
	done
	fail "wbd was not ready within 30 s"
}

# replay_summary: set REPLAY to what the start in $LOG replayed, where the
# log ended and why, and what it left out; count the reasons in ENDS.
declare -A ENDS=()
replay_summary() {
	local r d why
	REPLAY=
	r=$(sed -n 's/.*: replayed \([0-9]*\) record(s),.* the log ends at byte [0-9]*: \([^;]*\).*$/replayed \1 record(s), then \2/p' "$LOG")
	d=$(sed -n 's/.*: \([0-9]*\) record(s) after byte [0-9]* not replayed (\([^)]*\)).*/; left out \1 record(s) (\2)/p' "$LOG")
	why=${r#*, then }
	[[ -n $r ]] || why="nothing to replay"
	ENDS[$why]=$((${ENDS[$why]:-0} + 1))
	REPLAY="${r:-replayed nothing}$d"
}

truncate -s $((BLOCKS * 4096)) "$T/remote.img"
truncate -s 32M "$T/log.img"
start_nbdkit kit file "$T/remote.img"
add_remote_export disk0 "$(kit_uri "$KIT_SOCK")" \
	"journal = { path = \"$T/log.img\"; size = 0; mode = \"on-flush\"; };"
# No write-behind (which would put most writes on the remote within
# milliseconds, log or not): what the last half second's FLUSHes covered
# is in the log alone.  The periodic pass and the log's reclaim (a
# writeback and a FLUSH of the remote, then a checkpoint) every 0.5 s, so
# that cuts also meet writeback and checkpoints; the log wraps every few
# cycles, and at times fills (a FLUSH then writes back instead).
write_cache_config 64M 'dirty_writeback_centisecs = 50; dirty_expire_centisecs = 100;'
add_remote_settings 'write_behind = false;'
sed -i 's/^writeback = {/memory = { prefault = false; };\nwriteback = {/' "$CONF"
rm -f "$T/cut" "$T/cut.done"
# The log is made on the file itself (a new log is written whole with
# zeroes: through FUSE and the filter's overlay that takes seconds), and
# left empty by a clean stop; the cycles use it through the mount.
start_log_wbd
stop_wbd
sed -i "s|path = \"$T/log.img\"|path = \"$WAL\"|" "$CONF"
grep -qF "path = \"$WAL\"" "$CONF" || fail "the log's path was not changed in $CONF"

start=$SECONDS
for ((c = 1; c <= CYCLES; c++)); do
	case $((c % 3)) in
	1) keep=0 at=request ;;
	2) keep=50 at=flush ;;
	0) keep=0 at=flush ;;
	esac
	if ((c == FLUSH_CYCLES + 1)); then
		log "the log in mode on-write from cycle $c"
		sed -i 's/mode = "on-flush"/mode = "on-write"/' "$CONF"
		grep -q 'mode = "on-write"' "$CONF" || fail "the mode was not changed in $CONF"
		POWERCUT_MODE=on-write
	fi
	mount_log "$keep" "$at"
	start_log_wbd
	replay_summary
	"$PYTHON" "$T/cycle.py" "$(uri_unix disk0)" "$BLOCKS" "$T/state.json" \
		"$T/hist.$((c - 1))" "$c" "$T/hist.$c" >"$T/cycle.out" 2>&1 &
	client=$!
	_PIDS+=("$client")
	for ((i = 0; i < 400; i++)); do
		[[ -s $T/hist.$c ]] && break
		proc_alive "$client" || break
		sleep 0.05
	done
	[[ -s $T/hist.$c ]] || fail "the check or the client failed: $(cat "$T/cycle.out")"
	((c == 1)) || log "cycle $((c - 1)): after $delay ms, $what; $(cat "$T/cycle.out"); the start $REPLAY"
	delay=$((200 + RANDOM % 1300))
	note=
	((keep == 0)) || note=" (each 4 KiB with a chance of $keep% to stay)"
	sleep "$((delay / 1000)).$(printf '%03d' $((delay % 1000)))"
	# The power goes, and wbd with it.
	touch "$T/cut"
	if [[ $at == flush ]]; then
		for ((i = 0; i < 200; i++)); do
			[[ -e $T/cut.done ]] && break
			sleep 0.01
		done
		[[ -e $T/cut.done ]] || note+=" (no FLUSH of the log within 2 s)"
	fi
	kill -KILL "$WBD_PID"
	wait_exit "$WBD_PID" 10 || fail "wbd still running 10 s after SIGKILL"
	# nbdkit 1.32 may abort when its client dies with requests in its
	# threads (restart_kit_after_kill, lib-remote.sh): seen once in CI,
	# with writeback's writes on a connection of their own.  The remote
	# is its file, which holds every write nbdkit answered: a fresh
	# nbdkit on it is the same remote.
	if ! proc_alive "$KIT_PID"; then
		start_nbdkit kit file "$T/remote.img"
		note+=" (the remote's nbdkit had died: started again)"
	fi
	wait_exit "$client" 20 || fail "the client did not stop once wbd was killed"
	((EXIT_STATUS == 0)) || fail "the client failed: $(cat "$T/cycle.out")"
	umount_log
	# A cut at the client's end comes as nbdkit sees nbdfuse go.
	for ((i = 0; i < 100; i++)); do
		[[ -s $T/cut.done ]] && break
		sleep 0.05
	done
	[[ -s $T/cut.done ]] || fail "the log's device was never cut"
	what="$(cat "$T/cut.done")$note"
	rm -f "$T/cut" "$T/cut.done"
done

mount_log 0 request
start_log_wbd
replay_summary
out=$("$PYTHON" "$T/cycle.py" "$(uri_unix disk0)" "$BLOCKS" "$T/state.json" \
	"$T/hist.$CYCLES" 2>&1) || fail "$out"
log "cycle $CYCLES: after $delay ms, $what; $out; the start $REPLAY"
stop_wbd
umount_log
"$PYTHON" - "$T/remote.img" "$T/state.json" <<'PY' || fail "see above"
import json, struct, sys
img = open(sys.argv[1], "rb").read()
state = json.load(open(sys.argv[2]))
for b, tag in enumerate(state):
    want = bytes(4096) if tag is None else \
        struct.pack("<IIII", 0x54554350, tag[0], tag[1], b) * 256
    if img[b * 4096:(b + 1) * 4096] != want:
        sys.exit("FAIL: after SIGTERM the remote's block %d is not %s, "
                 "which wbd read back last" % (b, tag))
PY
ends=
for why in "${!ENDS[@]}"; do
	ends+="${ends:+, }$why: ${ENDS[$why]}"
done
log "where each replay ended: $ends"
log "PASS: $CYCLES power cuts ($FLUSH_CYCLES on-flush, $((CYCLES - FLUSH_CYCLES)) on-write) in $((SECONDS - start)) s"
