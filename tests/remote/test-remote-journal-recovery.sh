#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Recovery from a damaged write log, and a log that is not the export's.
# Three FLUSHed batches A, B, C (1 MiB each, apart) are only in the log (the
# remote is stopped) when wbd is killed.  Then, on copies of that log:
#   - a torn tail (the log cut in the middle of C): A and B come back, C
#     does not, and the log says where it ended and why;
#   - a flipped bit in B's data: A comes back, B and C do not (nothing of
#     the bad record, nor anything after it, is written);
#   - the log given to an export of another name, or of another size:
#     wbd refuses to start, naming the log and what differs, and the log
#     is left as it was.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd

MiB=$((1 << 20))
truncate -s 64M "$T/remote.img"
cp "$T/remote.img" "$T/remote0.img"
start_nbdkit kit file "$T/remote.img"
JOURNAL="journal = { path = \"$T/disk0.wal\"; size = \"16M\"; };"
add_remote_export disk0 "$(kit_uri "$KIT_SOCK")" "$JOURNAL"
write_cache_config 128M 'dirty_background_bytes = "64M"; dirty_bytes = "100M"; dirty_writeback_centisecs = 0; dirty_expire_centisecs = 0;'
add_remote_settings 'connect_timeout_ms = 1000; reconnect_max_ms = 300; io_timeout_ms = 1500; write_behind = false;'
cp "$CONF" "$T/good.conf"
start_wbd
for b in A B C; do head -c 1M /dev/urandom >"$T/$b"; done

stop_kit "$KIT_PID" KILL
"$PYTHON" - "$(uri_unix disk0)" "$T" <<'PY' || fail "writing through wbd failed"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
for i, b in enumerate("ABC"):
    h.pwrite(open("%s/%s" % (sys.argv[2], b), "rb").read(), i * (8 << 20))
    h.flush()       # one batch each, answered from the log
h.shutdown()
PY
kill -KILL "$WBD_PID"
wait_exit "$WBD_PID" 10 || fail "wbd still running after SIGKILL"
cp "$T/disk0.wal" "$T/whole.wal"

# Where each batch lies: after the two 4 KiB superblocks, each one record
# (a 64-byte header and 1 MiB of data), each starting on a 4 KiB boundary.
area=8192
batch=$(( (64 + MiB + 4095) / 4096 * 4096 ))
A_at=$area B_at=$((area + batch)) C_at=$((area + 2 * batch))

# recover EXPECT: start the remote and wbd on $T/disk0.wal, check that the
# batches in EXPECT (e.g. "AB") read back and the others read as the
# remote's zeroes, then stop everything.
recover() {
	local expect=$1
	cp "$T/remote0.img" "$T/remote.img"
	start_nbdkit kit file "$T/remote.img"
	: >"$LOG"
	start_wbd
	"$PYTHON" - "$(uri_unix disk0)" "$T" "$expect" <<'PY' || fail "see above ($expect)"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
for i, b in enumerate("ABC"):
    got = h.pread(1 << 20, i * (8 << 20))
    want = open("%s/%s" % (sys.argv[2], b), "rb").read()
    if b in sys.argv[3]:
        if got != want:
            sys.exit("FAIL: batch %s was not replayed" % b)
    elif got != bytes(1 << 20):
        sys.exit("FAIL: batch %s should not have been replayed, yet %s"
                 % (b, "it was" if got == want else "its range changed"))
h.shutdown()
PY
	stop_wbd
	stop_kit "$KIT_PID"
}

log "the whole log: A, B and C"
recover ABC
grep -q "replayed 3 record(s), 3145728 bytes" "$LOG" || fail "the replay was not logged: $(grep 'write log' "$LOG")"

log "a torn tail, cut in the middle of C"
cp "$T/whole.wal" "$T/disk0.wal"
truncate -s $((C_at + 64 + 300000)) "$T/disk0.wal"
recover AB
grep -Eq "replayed 2 record\(s\).*ends at byte $C_at: " "$LOG" ||
	fail "the replay did not say where the log ended: $(grep 'write log' "$LOG")"

log "a flipped bit in B's data"
cp "$T/whole.wal" "$T/disk0.wal"
"$PYTHON" - "$T/disk0.wal" $((B_at + 64 + 4321)) <<'PY'
import sys
f = open(sys.argv[1], "r+b")
f.seek(int(sys.argv[2]))
b = f.read(1)
f.seek(int(sys.argv[2]))
f.write(bytes([b[0] ^ 0x10]))
PY
recover A
grep -Eq "replayed 1 record\(s\).*ends at byte $B_at: bad checksum" "$LOG" ||
	fail "the replay did not say it stopped at a bad checksum: $(grep 'write log' "$LOG")"

log "the log given to another export"
cp "$T/whole.wal" "$T/disk0.wal"
start_nbdkit kit file "$T/remote.img"
sed "s/name = \"disk0\"/name = \"disk1\"/" "$T/good.conf" >"$CONF"
: >"$LOG"
spawn_wbd "$CONF" "$LOG"
wait_exit "$SPAWNED_PID" 20 || fail "wbd started on another export's log"
[[ $EXIT_STATUS != 0 ]] || fail "wbd exited 0 on another export's log"
grep -q "disk1.*disk0.wal" "$LOG" || fail "the refusal does not name the export and the log: $(tail -3 "$LOG")"
grep -q "disk0" "$LOG" || fail "the refusal does not name the log's export"
cmp -s "$T/whole.wal" "$T/disk0.wal" || fail "the refused log was changed"
log "refused: $(grep -m1 'write log' "$LOG")"

log "the export's size changed"
truncate -s 32M "$T/small.img"
stop_kit "$KIT_PID"
start_nbdkit kit file "$T/small.img"
cp "$T/good.conf" "$CONF"
: >"$LOG"
spawn_wbd "$CONF" "$LOG"
wait_exit "$SPAWNED_PID" 20 || fail "wbd started on a log of another size"
[[ $EXIT_STATUS != 0 ]] || fail "wbd exited 0 on a log of another size"
grep -q "disk0.wal" "$LOG" || fail "the refusal does not name the log: $(tail -3 "$LOG")"
cmp -s "$T/whole.wal" "$T/disk0.wal" || fail "the refused log was changed"
log "refused: $(grep -m1 'write log' "$LOG")"
stop_kit "$KIT_PID"
log "PASS"
