#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# An ordered write log killed while it applies its epochs to the remote
# applies the rest, in order, once restarted.
#   - 30 epochs (tests/remote/epochs.py), each FLUSHed, through an export
#     over nbdkit's file plugin behind its delay filter (150 ms a write,
#     so that the kill comes while epochs wait even on a loaded machine):
#     the FLUSHes are answered by the log long before the remote has them.
#   - wbd gets SIGKILL while epochs are still to apply (wbctl status:
#     journal.apply_lag_epochs > 0).  The remote then shows whole epochs
#     in order (and perhaps part of the next).
#   - wbd restarts: the replay puts the log's records in the cache and
#     applies its batches from the log, in order.  Sampled all along (nbdkit
#     stopped, its file copied, let go on), the remote only ever shows whole
#     epochs in order, never going back; at the end every epoch, that is
#     every FLUSHed byte, is on the remote, every byte reads back through
#     wbd, and the log is empty.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl
nbdkit --filter=delay null --dump-plugin >/dev/null 2>&1 ||
	skip "nbdkit's delay filter is not installed"

EPOCHS=30

epochs_checker "$EPOCHS"
truncate -s 16M "$T/remote.img"
start_nbdkit kit --filter=delay file "$T/remote.img" delay-write=150ms
add_remote_export disk0 "$(kit_uri "$KIT_SOCK")" \
	"journal = { path = \"$T/disk0.wal\"; size = \"16M\"; ordered = true; };"
write_cache_config 64M 'dirty_writeback_centisecs = 50;'
start_wbd

log "writing $EPOCHS epochs"
"$PYTHON" "$SRCDIR/epochs.py" write "$(uri_unix disk0)" "$EPOCHS" >"$T/writer.out" 2>&1 ||
	fail "the writer failed: $(cat "$T/writer.out")"
read -r lag applied <<<"$(jfield apply_lag_epochs epochs_applied)"
((lag > 0)) || fail "every epoch was applied already ($applied): nothing left to kill mid-apply"
log "SIGKILL with $lag epoch(s) not yet applied ($applied applied)"
kill -KILL "$WBD_PID"
wait_exit "$WBD_PID" 10 || fail "wbd still running after SIGKILL"
restart_kit_after_kill
sample
log "the remote after the kill: epochs up to $K"
((K < EPOCHS)) || fail "the remote holds every epoch already: the kill came too late"

: >"$LOG"
start_wbd
# Sample while it applies what it replayed.
for ((i = 0; i < 600; i++)); do
	sample
	read -r lag records <<<"$(jfield apply_lag_epochs records)"
	((lag == 0 && records == 0 && K == EPOCHS)) && break
	sleep 0.05
done
sample
log "$SAMPLES samples; the remote at epoch $K"
grep "write log" "$LOG" | head -3 >&2
grep -q "replayed .* record(s)" "$LOG" || fail "nothing was replayed"
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
