#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A write log's state file goes where journal.state_dir says, named after
# the log's path, and a start reads it there (docs/journal.md, "A log
# that fails").
#   - A file log with the top level's state_dir (missing: the start makes
#     it, 0700): the log, on a FUSE file whose writes fail on demand,
#     fails in use and is marked stale in STATE_DIR/<the log's path,
#     escaped>.state, nothing beside the log; wbd -n says the file is
#     there, the log's, and its stale_below; the next start replays none
#     of it, says so naming that file, and removes it.
#   - A log on a block device (a loop device; skipped, 77, where none can
#     be set up): wbd -n refuses it with neither state_dir nor journal.dir,
#     at the line of its path; with journal.dir its state file goes
#     there (the start makes the directory); with an export's own state_dir, data
#     FLUSHed into the log, SIGKILL, and a state file there marking the
#     log's records stale: the next start replays none of them.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

MiB=$((1 << 20))

# state_file LOG DIR: where LOG's state file goes in DIR.
state_file() {
	"$PYTHON" - "$1" "$2" <<'PY'
import sys
log, d = sys.argv[1].encode(), sys.argv[2]
out = ""
for i, b in enumerate(log):
    c = chr(b)
    if c.isascii() and (c.isalnum() or c in "-_" or (c == "." and i)):
        out += c
    else:
        out += "%%%02X" % b
assert len(out) <= 180, "a path too long for this test"
print("%s/%s.state" % (d, out))
PY
}

# write_flush NAME OFFSET_MIB: write $T/NAME there through wbd, FLUSH.
write_flush() {
	"$PYTHON" - "$(uri_unix disk0)" "$T/$1" $(($2 * MiB)) <<'PY' || fail "see above"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(open(sys.argv[2], "rb").read(), int(sys.argv[3]))
h.flush()
h.shutdown()
PY
}

for b in A B C; do head -c 1M /dev/urandom >"$T/$b"; done
WB='dirty_background_bytes = "32M"; dirty_bytes = "48M"; dirty_writeback_centisecs = 360000; dirty_expire_centisecs = 360000;'

log "a file log fails in use: its state file goes to journal.state_dir"
start_failing_file "$T/fuse" "$T/fail" "$T/fail-trim"
ln -s "$FUSE_FILE" "$T/disk0.wal"
truncate -s 64M "$T/disk0.img"
STATE=$(state_file "$T/disk0.wal" "$T/state")
CONF_EXTRA="journal = { state_dir = \"$T/state\"; };"
_EXPORTS=("  { name = \"disk0\"; backing = \"$T/disk0.img\"; journal = { path = \"$T/disk0.wal\"; size = 0; }; }")
write_cache_config 64M "$WB"
start_wbd
[[ $(stat -c %a "$T/state") == 700 ]] || fail "the start did not make $T/state, mode 700"
write_flush A 0
touch "$T/fail" "$T/fail-trim"
write_flush B 0
grep -q "write log $T/disk0.wal cannot be emptied (.*): marked stale in $STATE instead" "$LOG" ||
	fail "the log was not said marked stale in $STATE: $(grep 'write log' "$LOG")"
stop_wbd
rm -f "$T/fail" "$T/fail-trim"
[[ -f $STATE ]] || fail "no state file $STATE: $(ls -A "$T/state")"
[[ -e $T/disk0.wal.state ]] && fail "a state file beside the log, not in state_dir"
log_has_superblock ||
	fail "the failed log reads as no log: this test would not test the state file"
out=$("$WBD" -n -c "$CONF" 2>&1) || fail "wbd -n refused a log with a state file: $out"
grep -qF "exports[0] \"disk0\": write log $T/disk0.wal: state file $STATE: uuid " <<<"$out" &&
	grep -q "(the log's), stale_below [1-9][0-9]*: a start replays none of its records below it" <<<"$out" ||
	fail "wbd -n does not say what the log's state file says: $out"
: >"$LOG"
start_wbd
reads_back B 0 || fail "wbd reads back the stale A (or else), not B"
grep -q "write log $T/disk0.wal: [0-9]* record(s) below sequence [0-9]* not replayed: $STATE marks them stale" "$LOG" ||
	fail "the start does not say it left the stale records out: $(grep 'write log' "$LOG")"
[[ -e $STATE ]] && fail "the state file was not removed"
stop_started_daemons

log "a log on a block device"
truncate -s 16M "$T/loop.img"
attach_loop LOOPDEV "$T/loop.img" || skip "cannot set up a loop device here"

CONF_EXTRA=
_EXPORTS=("  { name = \"disk0\"; backing = \"$T/disk0.img\";
    journal = { path = \"$LOOPDEV\"; size = 0; }; }")
write_cache_config 64M "$WB"
line=$(grep -n "path = \"$LOOPDEV\"" "$CONF" | cut -d: -f1)
rc=0
"$WBD" -n -c "$CONF" >"$T/check.out" 2>&1 || rc=$?
((rc == 1)) || fail "wbd -n accepted a block device log with no place for its state file: $(cat "$T/check.out")"
grep -q "^wbd: $CONF:$line: exports\[0\]\.journal\.path: $LOOPDEV is a block device: its state file (written if the log fails) needs journal\.state_dir" "$T/check.out" ||
	fail "wbd -n does not name the log's line and state_dir: $(cat "$T/check.out")"

# journal.dir, which the start makes, holds it without a state_dir.
CONF_EXTRA="journal = { dir = \"$T/wal\"; };"
write_cache_config 64M "$WB"
out=$("$WBD" -n -c "$CONF" 2>&1) ||
	fail "wbd -n refused a block device log with journal.dir: $out"
grep -qxF "exports[0] \"disk0\": write log $LOOPDEV: no state file ($(state_file "$LOOPDEV" "$T/wal"))" <<<"$out" ||
	fail "wbd -n does not place the state file in journal.dir: $out"
start_wbd
[[ -d $T/wal ]] || fail "the start did not make journal.dir for the state file"
stop_wbd

CONF_EXTRA=
_EXPORTS=("  { name = \"disk0\"; backing = \"$T/disk0.img\";
    journal = { path = \"$LOOPDEV\"; size = 0; state_dir = \"$T/state2\"; }; }")
write_cache_config 64M "$WB"
"$WBD" -n -c "$CONF" >"$T/check.out" 2>&1 ||
	fail "wbd -n refused a block device log with state_dir: $(cat "$T/check.out")"
STATE=$(state_file "$LOOPDEV" "$T/state2")
: >"$LOG"
start_wbd
write_flush C 8
next=$("$WBCTL" -s "$T/control.sock" status --json | "$PYTHON" -c 'import json, sys
print(json.load(sys.stdin)["exports"][0]["journal"]["next_seq"])')
stop_wbd "$WBD_PID" KILL
# What journal_mark_stale writes: every record of this log below $next
# is stale (as after the log failed, once C was on the backing device).
write_log_state "$STATE" "$next" "$LOOPDEV"
: >"$LOG"
start_wbd
grep -q "write log $LOOPDEV: [0-9]* record(s) below sequence $next not replayed: $STATE marks them stale" "$LOG" ||
	fail "the start did not read the state file in state_dir: $(grep 'write log' "$LOG")"
grep -q 'replayed [0-9]* record(s)' "$LOG" && fail "records were replayed: $(grep replayed "$LOG")"
reads_back C 8 && fail "C was replayed from a log its state file marks stale"
[[ -e $STATE ]] && fail "the state file was not removed"
log "state files in state_dir, written and read there"
