#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A write log that fails and can no longer be written is never replayed
# over newer data at the next start.  The log is a file on a FUSE mount
# (nbdkit's memory plugin behind its error filter, through nbdfuse) whose
# writes all fail while $T/fail exists, and its trims and zeroings (no
# hole can be punched) while $T/fail-trim does, reached through a
# symbolic link in $T so that its state file ($T/disk0.wal.state) can be
# written.
#   - A fails in use: A FLUSHed into the log; the log fails; B written
#     over A and FLUSHed (written back instead, and the log, which cannot
#     be emptied, marked stale in its state file: the FLUSH succeeds);
#     SIGTERM drains.  With the log writable again, the next start
#     replays none of it (the state file says why, and is removed):
#     B reads back and stays on the backing file, and the log works.
#   - The shutdown's checkpoint fails: C FLUSHed into a good log; the log
#     fails; SIGTERM drains C and cannot write the log's checkpoint: the
#     log is marked stale.  D written over C on the backing file while
#     wbd is down; the next start keeps D.
#   - Neither works (the state file's place taken by a directory): a
#     FLUSH fails, and SIGTERM does not end wbd while the log could be
#     replayed; once the state file can be written, wbd exits, and the
#     next start keeps what the drain wrote.
#   - Writes fail, but a hole can be punched: the log is emptied so (no
#     state file), and the next start makes a new log.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

MiB=$((1 << 20))

status_journal() {
	"$WBCTL" -s "$T/control.sock" status --json | "$PYTHON" -c 'import json, sys
print(json.dumps(json.load(sys.stdin)["exports"][0]["journal"]))'
}

# write_flush NAME OFFSET_MIB [fail]: write $T/NAME at OFFSET MiB through
# wbd and FLUSH; the FLUSH must succeed, or fail with "fail".
write_flush() {
	"$PYTHON" - "$(uri_unix disk0)" "$T/$1" $(($2 * MiB)) "${3:-ok}" <<'PY' || fail "see above"
import nbd, sys
uri, path, off, want = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
h = nbd.NBD()
h.connect_uri(uri)
h.pwrite(open(path, "rb").read(), off)
try:
    h.flush()
    if want == "fail":
        sys.exit("FAIL: a FLUSH of %s succeeded while the failed log could "
                 "be neither emptied nor marked stale" % path)
except nbd.Error as e:
    if want != "fail":
        sys.exit("FAIL: the FLUSH of %s failed: %s" % (path, e))
h.shutdown()
PY
}

# backing_holds NAME OFFSET_MIB: the backing file holds $T/NAME there.
backing_holds() {
	cmp -s -n "$MiB" -i "0:$(($2 * MiB))" "$T/$1" "$T/disk0.img"
}

start_failing_file "$T/fuse" "$T/fail" "$T/fail-trim"
ln -s "$FUSE_FILE" "$T/disk0.wal"
truncate -s 64M "$T/disk0.img"
_EXPORTS=("  { name = \"disk0\"; backing = \"$T/disk0.img\"; journal = { path = \"$T/disk0.wal\"; size = 0; }; }")
# No periodic writeback, and the log's reclaim once an hour: what a FLUSH
# logged stays in the log only, until the test makes it fail.
write_cache_config 128M 'dirty_background_bytes = "64M"; dirty_bytes = "100M"; dirty_writeback_centisecs = 360000; dirty_expire_centisecs = 360000;'
for b in A B C D E F G H; do head -c 1M /dev/urandom >"$T/$b"; done
start_wbd

log "A into the log; the log fails; B over A, written back"
write_flush A 0
backing_holds A 0 && fail "A went to the backing file: the log was not used"
touch "$T/fail" "$T/fail-trim"
write_flush B 0
backing_holds B 0 || fail "the FLUSH of B was answered before B was on the backing file"
j=$(status_journal)
log "journal: $j"
"$PYTHON" - "$j" <<'PY' || fail "see above"
import json, sys
j = json.loads(sys.argv[1])
if not j["broken"] or j["stale"]:
    sys.exit("FAIL: expected a broken log, marked stale: %s" % j)
PY
grep -q "write log $T/disk0.wal cannot be emptied (.*): marked stale in $T/disk0.wal.state" "$LOG" ||
	fail "the log was not said marked stale: $(grep 'write log' "$LOG")"
[[ -f $T/disk0.wal.state ]] || fail "no state file beside the log"
stop_wbd
rm -f "$T/fail" "$T/fail-trim"
backing_holds B 0 || fail "B is not on the backing file after the drain"
# Still a log, holding A: only its state file keeps it from being replayed.
log_has_superblock ||
	fail "the failed log reads as no log: this test would not test the state file"

log "a start with the log writable again"
: >"$LOG"
start_wbd
reads_back B 0 || fail "wbd reads back the stale A (or else), not B"
backing_holds B 0 || fail "the stale A was replayed over B on the backing file"
grep -q "write log $T/disk0.wal: [0-9]* record(s) below sequence [0-9]* not replayed: $T/disk0.wal.state marks them stale" "$LOG" ||
	fail "the start does not say it left the stale records out: $(grep 'write log' "$LOG")"
grep -q 'replayed [0-9]* record(s)' "$LOG" && fail "records were replayed: $(grep replayed "$LOG")"
[[ -e $T/disk0.wal.state ]] && fail "the state file was not removed"

log "C into the good log; its checkpoint at shutdown fails"
write_flush C 8
backing_holds C 8 && fail "C went to the backing file: the log was not used"
"$PYTHON" - "$(status_journal)" <<'PY' || fail "see above"
import json, sys
j = json.loads(sys.argv[1])
if j["broken"] or j["stale"] or j["commits"] < 1:
    sys.exit("FAIL: the log is not in use again: %s" % j)
PY
touch "$T/fail" "$T/fail-trim"
stop_wbd
rm -f "$T/fail" "$T/fail-trim"
backing_holds C 8 || fail "C is not on the backing file after the drain"
grep -q "write log $T/disk0.wal: a checkpoint failed" "$LOG" ||
	fail "the failed checkpoint was not logged: $(grep 'write log' "$LOG")"
[[ -f $T/disk0.wal.state ]] || fail "no state file after the failed checkpoint"
log_has_superblock ||
	fail "the failed log reads as no log: this test would not test the state file"
dd if="$T/D" of="$T/disk0.img" bs=1M seek=8 conv=notrunc status=none
: >"$LOG"
start_wbd
reads_back D 8 || fail "wbd does not read back D, written on the backing file while it was down"
backing_holds D 8 || fail "the stale C was replayed over D on the backing file"

log "neither emptied nor marked: FLUSHes and the shutdown wait"
write_flush E 16
mkdir "$T/disk0.wal.state"
touch "$T/fail" "$T/fail-trim"
write_flush F 16 fail
grep -q "cannot be emptied (.*) nor marked stale in $T/disk0.wal.state" "$LOG" ||
	fail "not said: $(grep 'write log' "$LOG")"
kill -TERM "$WBD_PID"
sleep 3
proc_alive "$WBD_PID" || fail "wbd exited while its log could still be replayed over F"
rmdir "$T/disk0.wal.state"
wait_exit "$WBD_PID" 30 || fail "wbd still running 30 s after the state file could be written"
[[ $EXIT_STATUS == 0 ]] || fail "wbd exited with $(describe_status "$EXIT_STATUS")"
[[ -f $T/disk0.wal.state ]] || fail "no state file"
rm -f "$T/fail" "$T/fail-trim"
backing_holds F 16 || fail "the drain did not write F"
log_has_superblock ||
	fail "the failed log reads as no log: this test would not test the state file"
: >"$LOG"
start_wbd
reads_back F 16 || fail "wbd does not read back F after the start"
backing_holds F 16 || fail "the stale E was replayed over F"
reads_back B 0 || fail "B lost"
reads_back D 8 || fail "D lost"

log "writes fail, a hole can be punched: the log is emptied so"
write_flush G 24
backing_holds G 24 && fail "G went to the backing file: the log was not used"
touch "$T/fail"
write_flush H 24
grep -q "write log $T/disk0.wal emptied" "$LOG" ||
	fail "the log was not emptied by a hole: $(grep 'write log' "$LOG")"
[[ -e $T/disk0.wal.state ]] && fail "a state file, though the log was emptied"
stop_wbd
rm -f "$T/fail"
! log_has_superblock ||
	fail "the emptied log still starts with a superblock"
: >"$LOG"
start_wbd
reads_back H 24 || fail "wbd does not read back H"
backing_holds H 24 || fail "G was replayed over H"
stop_wbd
log "PASS"
