#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# An ordered write log killed in the middle of its replay, while the
# replay applies epochs to make room in a cache smaller than the log,
# never applies an older epoch again over a newer one at the next start.
#   - 30 epochs (tests/remote/epochs.py), each FLUSHed, through an export
#     over nbdkit's file plugin behind its delay filter (150 ms a write):
#     answered by the log long before the remote has them.  SIGKILL with
#     epochs still to apply.
#   - A start with a cache of 512 KiB, smaller than what the log holds:
#     the replay applies epochs as it reads, each checkpointed.  SIGKILL
#     once the remote has gained 4 epochs, before the replay ends.
#   - A start with the cache as before: the replay begins after the last
#     epoch applied, or at the one being applied (its bytes say how many
#     epochs it holds), and the remote, sampled all along (nbdkit stopped,
#     its file copied, let go on), only ever shows whole epochs in order,
#     never going back; at the end it holds every epoch, every byte reads
#     back through wbd, and the log is empty.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl
nbdkit --filter=delay null --dump-plugin >/dev/null 2>&1 ||
	skip "nbdkit's delay filter is not installed"

EPOCHS=30
EPOCH_BYTES=$((48 * 4096)) # epochs.py: PER_EPOCH blocks of 4 KiB

epochs_checker "$EPOCHS"
truncate -s 16M "$T/remote.img"
start_nbdkit kit --filter=delay file "$T/remote.img" delay-write=150ms
add_remote_export disk0 "$(kit_uri "$KIT_SOCK")" \
	"journal = { path = \"$T/disk0.wal\"; size = \"16M\"; ordered = true; };"
write_cache_config 64M 'dirty_writeback_centisecs = 50;'
cp "$CONF" "$T/big.conf"
start_wbd

log "writing $EPOCHS epochs"
"$PYTHON" "$SRCDIR/epochs.py" write "$(uri_unix disk0)" "$EPOCHS" >"$T/writer.out" 2>&1 ||
	fail "the writer failed: $(cat "$T/writer.out")"
read -r lag applied <<<"$(jfield apply_lag_epochs epochs_applied)"
((lag >= 12)) || fail "only $lag epoch(s) left to apply ($applied applied): too few for a replay larger than the cache"
kill -KILL "$WBD_PID"
wait_exit "$WBD_PID" 10 || fail "wbd still running after SIGKILL"
restart_kit_after_kill
sample
K0=$K
log "SIGKILL with $lag epoch(s) not yet applied; the remote at epoch $K0"

log "a start with a 512 KiB cache, killed mid-replay"
write_cache_config 512K 'dirty_writeback_centisecs = 50;'
: >"$LOG"
spawn_wbd "$CONF" "$LOG"
WBD_PID=$SPAWNED_PID
for ((i = 0; i < 600; i++)); do
	proc_alive "$WBD_PID" || fail "wbd exited during the replay: $(tail -5 "$LOG")"
	grep -q 'replayed [0-9]* record(s)' "$LOG" && break
	sample
	((K >= K0 + 4)) && break
	sleep 0.05
done
grep -q 'replayed [0-9]* record(s)' "$LOG" &&
	fail "the replay ended before the remote gained 4 epochs (at $K, from $K0): nothing applied while replaying"
((K >= K0 + 4)) || fail "the remote stayed at epoch $K during the replay"
kill -KILL "$WBD_PID"
wait_exit "$WBD_PID" 10 || fail "wbd still running after SIGKILL"
restart_kit_after_kill
sample
K1=$K
log "SIGKILL mid-replay; the remote at epoch $K1"

log "a start with the cache as before"
cp "$T/big.conf" "$CONF"
: >"$LOG"
start_wbd
for ((i = 0; i < 600; i++)); do
	sample
	read -r lag records <<<"$(jfield apply_lag_epochs records)"
	((lag == 0 && records == 0 && K == EPOCHS)) && break
	sleep 0.05
done
sample
log "$SAMPLES samples; the remote at epoch $K"
grep "write log" "$LOG" | head -3 >&2
read -r bytes <<<"$(jfield replay.bytes)"
# Epochs before K1 are whole on the remote; the last of them may have
# missed its checkpoint, and K1 itself may be in part: at most
# EPOCHS - K1 + 2 epochs are left to replay.
((bytes <= (EPOCHS - K1 + 2) * EPOCH_BYTES)) ||
	fail "the replay held $((bytes / EPOCH_BYTES)) epochs, more than the $((EPOCHS - K1 + 2)) not yet applied: epochs applied during the killed replay were not checkpointed"
python3 "$SRCDIR/epochs.py" final "$T/remote.img" "$EPOCHS" ||
	fail "after the replay's apply the remote lacks FLUSHed epochs"
"$PYTHON" - "$(uri_unix disk0)" "$T/remote.img" <<'PY' || fail "see above"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
want = open(sys.argv[2], "rb").read(256 * 4096)
if h.pread(len(want), 0) != want:
    sys.exit("FAIL: wbd does not read back what the remote holds")
h.shutdown()
PY
read -r records lost <<<"$(jfield records order_lost)"
((records == 0)) || fail "the log still holds $records record(s)"
[[ $lost == False ]] || fail "order_lost: $lost"
stop_wbd
log "PASS"
