#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A write log that is full, and one that fails, never lose a FLUSH.
#   - Full: a FLUSH covering more than the log holds is written back and
#     flushed on the backing file instead, and succeeds; the backing file
#     holds its data when it is answered; wbctl status counts the
#     fallback and says why; the log is emptied, and later FLUSHes use it
#     again.
#   - Failing: the log on a FUSE file (nbdkit's memory plugin behind its
#     error filter, through nbdfuse) whose writes (and trims: no hole
#     can be punched either) start failing with EIO.
#     The FLUSH that meets the error writes back instead; as long as the
#     broken log still holds records it cannot empty, a FLUSH fails (a
#     start would replay them over newer data); once it can, the log is
#     emptied, FLUSHes succeed through the backing file, and after a
#     kill -9 and a new start every FLUSHed byte is there.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

status_journal() {
	"$WBCTL" -s "$T/control.sock" status --json | "$PYTHON" -c 'import json, sys
print(json.dumps(json.load(sys.stdin)["exports"][0]["journal"]))'
}

truncate -s 64M "$T/disk0.img"
_EXPORTS=("  { name = \"disk0\"; backing = \"$T/disk0.img\"; journal = { path = \"$T/small.wal\"; size = \"2M\"; }; }")
write_cache_config 128M 'dirty_background_bytes = "64M"; dirty_bytes = "100M"; dirty_writeback_centisecs = 0; dirty_expire_centisecs = 0;'
start_wbd

log "a FLUSH that the log holds, then one it cannot"
"$PYTHON" - "$(uri_unix disk0)" "$T/disk0.img" <<'PY' || fail "see above"
import nbd, os, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
small = os.urandom(256 << 10)
h.pwrite(small, 0)
h.flush()
img = open(sys.argv[2], "rb")
if img.read(len(small)) == small:
    sys.exit("FAIL: a FLUSH the log could take went to the backing file")
# Fits the log's size but not what is left of it; then more than its size.
for size, off in ((1900 << 10, 8 << 20), (4 << 20, 16 << 20)):
    big = os.urandom(size)
    h.pwrite(big, off)
    h.flush()
    img.seek(off)
    if img.read(len(big)) != big:
        sys.exit("FAIL: a FLUSH of %d bytes the log could not take was "
                 "answered before its data was on the backing file" % size)
    img.seek(0)
    if img.read(len(small)) != small:
        sys.exit("FAIL: the fallback FLUSH left earlier data off the "
                 "backing file")
h.pwrite(small, 32 << 20)
h.flush()
h.shutdown()
PY
j=$(status_journal)
log "journal: $j"
"$PYTHON" - "$j" <<'PY' || fail "see above"
import json, sys
j = json.loads(sys.argv[1])
if j["fallbacks"] < 2 or "than the log holds" not in (j["last_fallback"] or ""):
    sys.exit("FAIL: the fallback is not shown: %s" % j)
if j["commits"] < 2:
    sys.exit("FAIL: the log was not used before and after: %s" % j)
if j["broken"]:
    sys.exit("FAIL: a full log is not a broken one: %s" % j)
PY
"$WBCTL" -s "$T/control.sock" status | tr '\n' ' ' | tr -s ' ' >"$T/status.txt"
grep -Eq "disk0: +journal $T/small.wal \(on-flush\): .* used, .*commit\(s\).*written back instead \(last: more written" "$T/status.txt" ||
	fail "wbctl status does not show the write log: $(cat "$T/status.txt")"
grep -q 'a FLUSH writes back to the backing device instead of the write log: the log is full' "$LOG" ||
	fail "the fallback was not logged: $(grep 'instead of' "$LOG")"
stop_wbd

log "a log whose writes fail"
start_failing_file "$T/fuse" "$T/fail" "$T/fail"
rm -f "$CONF"
_EXPORTS=("  { name = \"disk0\"; backing = \"$T/disk0.img\"; journal = { path = \"$FUSE_FILE\"; size = 0; }; }")
write_cache_config 128M 'dirty_background_bytes = "64M"; dirty_bytes = "100M"; dirty_writeback_centisecs = 0; dirty_expire_centisecs = 0;'
start_wbd
for b in A B C; do head -c 1M /dev/urandom >"$T/$b"; done
"$PYTHON" - "$(uri_unix disk0)" "$T" <<'PY' || fail "see above"
import nbd, os, sys
T = sys.argv[2]
data = {b: open("%s/%s" % (T, b), "rb").read() for b in "ABC"}
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(data["A"], 0)
h.flush()                               # in the log
open(T + "/fail", "w").close()          # the log's writes fail from now
h.pwrite(data["B"], 8 << 20)
try:
    h.flush()
    sys.exit("FAIL: a FLUSH succeeded while the broken log could not "
             "be emptied")
except nbd.Error:
    pass
os.unlink(T + "/fail")
h.flush()                               # the log is emptied now
h.pwrite(data["C"], 16 << 20)
h.flush()                               # through the backing file
h.shutdown()
PY
j=$(status_journal)
log "journal: $j"
"$PYTHON" - "$j" <<'PY' || fail "see above"
import json, sys
j = json.loads(sys.argv[1])
if not j["broken"] or j["stale"]:
    sys.exit("FAIL: expected a broken log, emptied: %s" % j)
PY
"$WBCTL" -s "$T/control.sock" status | grep -q "journal .* BROKEN" ||
	fail "wbctl status does not show the log broken"
grep -q 'write log .* failed: .*; the log is no longer used' "$LOG" ||
	fail "the log's failure was not logged"
grep -q 'write log .* emptied' "$LOG" || fail "the log was not said emptied"
kill -KILL "$WBD_PID"
wait_exit "$WBD_PID" 10 || fail "wbd still running after SIGKILL"
: >"$LOG"
start_wbd
"$PYTHON" - "$(uri_unix disk0)" "$T" <<'PY' || fail "see above"
import nbd, sys
T = sys.argv[2]
h = nbd.NBD()
h.connect_uri(sys.argv[1])
for i, b in enumerate("ABC"):
    if h.pread(1 << 20, i * (8 << 20)) != open("%s/%s" % (T, b), "rb").read():
        sys.exit("FAIL: FLUSHed data %s lost after kill -9 and a start" % b)
h.shutdown()
PY
grep -q 'replayed' "$LOG" && fail "an emptied log was replayed"
log "PASS"
