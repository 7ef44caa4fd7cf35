#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# An ordered write log whose checkpoint fails while SIGTERM's drain
# applies the last epoch is never replayed over newer data at the next
# start.
#   - The log is a file on a FUSE mount (nbdkit's memory plugin behind its
#     error filter, through nbdfuse) whose writes, trims and zeroings all
#     fail while $T/fail exists, reached through a symbolic link in $T
#     (its state file, $T/disk0.wal.state, can be written); the remote is
#     nbdkit's file plugin behind its delay filter (150 ms a write).
#   - X (256 scattered 4 KiB blocks: seconds to apply) written, not
#     FLUSHed, nor committed by the tick; SIGTERM: the drain commits X to
#     the log and applies it; the log fails meanwhile, so the checkpoint
#     after X fails; the log is marked stale before wbd exits (with 0).
#   - Y written over X on the remote while wbd is down; the next start,
#     the log writable again, replays nothing: Y reads back through wbd
#     and stays on the remote.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl
nbdkit --filter=delay null --dump-plugin >/dev/null 2>&1 ||
	skip "nbdkit's delay filter is not installed"

# wbd first, then the remote and the FUSE mount its log is on.
_stop_all() {
	local rc=$? pid
	trap - ERR
	set +e
	stop_started_daemons 40
	for pid in "${_KIT_PIDS[@]}"; do
		proc_alive "$pid" && kill -TERM "$pid" 2>/dev/null
		wait_exit "$pid" 10 || kill -KILL "$pid" 2>/dev/null
	done
	(exit "$rc")
	_stop_slow_file_then_cleanup
}

# blocks PUT|WRITE|CHECK NAME URI: write and FLUSH (PUT), write only
# (WRITE) or compare (CHECK) the 256 blocks of NAME (X or Y: block i at
# 8 KiB * i, each full of NAME and i) through URI.
blocks() {
	"$PYTHON" - "$@" <<'PY'
import nbd, sys
what, name, uri = sys.argv[1:4]
h = nbd.NBD()
h.connect_uri(uri)
for i in range(256):
    want = (b"%s%03d" % (name.encode(), i)) * 1024
    off = i * 8192
    if what in ("PUT", "WRITE"):
        h.pwrite(want[:4096], off)
    elif h.pread(4096, off) != want[:4096]:
        sys.exit("block %d is not %s's" % (i, name))
if what == "PUT":
    h.flush()
h.shutdown()
PY
}

start_failing_file "$T/fuse" "$T/fail" "$T/fail"
trap _stop_all EXIT
ln -s "$FUSE_FILE" "$T/disk0.wal"
truncate -s 16M "$T/remote.img"
start_nbdkit kit --filter=delay file "$T/remote.img" delay-write=150ms
add_remote_export disk0 "$(kit_uri "$KIT_SOCK")" \
	"journal = { path = \"$T/disk0.wal\"; size = 0; ordered = true; };"
# No tick: what is written stays noted until the drain commits it.
write_cache_config 64M 'dirty_writeback_centisecs = 360000; dirty_expire_centisecs = 360000;'
start_wbd

log "X written; SIGTERM; the log fails while the drain applies X"
blocks WRITE X "$(uri_unix disk0)" || fail "writing X failed"
kill -TERM "$WBD_PID"
wait_log 5 'shutdown: writing back' || true
sleep 0.5 # the drain's commit is local: done; X's apply takes seconds
touch "$T/fail"
wait_exit "$WBD_PID" 60 || fail "wbd still running 60 s after SIGTERM"
[[ $EXIT_STATUS == 0 ]] || fail "wbd exited with $(describe_status "$EXIT_STATUS")"
rm -f "$T/fail"
blocks CHECK X "$(kit_uri "$KIT_SOCK")" || fail "the drain did not apply X to the remote"
grep "write log" "$LOG" | head -5 >&2
grep -q "write log $T/disk0.wal: a checkpoint failed" "$LOG" ||
	fail "no checkpoint failed: the test missed its moment"
[[ -f $T/disk0.wal.state ]] || fail "wbd exited leaving no state file for its failed log"
log_has_superblock ||
	fail "the failed log reads as no log: this test would not test the state file"

log "Y over X on the remote; a start replays nothing"
blocks PUT Y "$(kit_uri "$KIT_SOCK")" || fail "writing Y to the remote failed"
: >"$LOG"
start_wbd
blocks CHECK Y "$(uri_unix disk0)" || fail "wbd replayed the stale X over Y"
grep -q 'replayed [0-9]* record(s)' "$LOG" && fail "records were replayed: $(grep replayed "$LOG")"
sleep 1
blocks CHECK Y "$(kit_uri "$KIT_SOCK")" || fail "X was applied again over Y on the remote"
stop_wbd
log "PASS"
