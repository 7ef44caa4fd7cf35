#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# An ordered write log (journal.ordered = true) gives the remote whole
# FLUSH epochs only, in order.
#   - A client writes 40 epochs (tests/remote/epochs.py: 48 blocks of 4 KiB
#     each, every block saying its epoch, then a FLUSH), to an export over
#     nbdkit's file plugin behind its delay filter (10 ms a write), so that
#     applying the epochs lags behind the FLUSHes the log answers.
#   - Meanwhile, and until the log has applied everything, the remote is
#     sampled: nbdkit stopped (SIGSTOP), its file copied, nbdkit let go on
#     (SIGCONT).  Every sample must be epochs < K whole and a part of epoch
#     K, for some K, and K never goes back; the samples must see at least
#     three different K (the test saw the apply under way).
#   - In the end the remote holds every epoch, the log is empty, nothing
#     fell back to writeback, and wbctl status says so.
# ORDERED=false runs the same with an unordered log, whose writeback from
# the cache writes each page's newest data in offset order: it is expected
# to FAIL the samples' check (the test can tell the two apart).
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl
nbdkit --filter=delay null --dump-plugin >/dev/null 2>&1 ||
	skip "nbdkit's delay filter is not installed"

ORDERED=${ORDERED:-true}
EPOCHS=40

epochs_checker "$EPOCHS"
truncate -s 16M "$T/remote.img"
start_nbdkit kit --filter=delay file "$T/remote.img" delay-write=10ms
add_remote_export disk0 "$(kit_uri "$KIT_SOCK")" \
	"journal = { path = \"$T/disk0.wal\"; size = \"16M\"; ordered = $ORDERED; };"
write_cache_config 64M 'dirty_writeback_centisecs = 10; dirty_expire_centisecs = 10;'
start_wbd

log "writing $EPOCHS epochs (ordered = $ORDERED)"
"$PYTHON" "$SRCDIR/epochs.py" write "$(uri_unix disk0)" "$EPOCHS" 0.01 \
	>"$T/writer.out" 2>&1 &
WRITER=$!
for ((i = 0; i < 600; i++)); do
	sample
	proc_alive "$WRITER" || break
	sleep 0.02
done
wait "$WRITER" || fail "the writer failed: $(cat "$T/writer.out")"
log "the writer is done after $SAMPLES samples; the remote at epoch $LAST_K"
# What the log still has to apply.
for ((i = 0; i < 600; i++)); do
	sample
	if [[ $ORDERED == true ]]; then
		read -r lag records <<<"$(jfield apply_lag_epochs records)"
		((lag == 0 && records == 0 && K == EPOCHS)) && break
	else
		((K == EPOCHS)) && break
	fi
	sleep 0.05
done
sample
log "$SAMPLES samples, ${#SEEN_K[@]} different epochs seen: ${!SEEN_K[*]}"
python3 "$SRCDIR/epochs.py" final "$T/remote.img" "$EPOCHS" ||
	fail "the remote does not hold every epoch whole after 30 s"
((${#SEEN_K[@]} >= 3)) ||
	fail "the samples saw only ${#SEEN_K[@]} different epochs: too little of the apply to tell"
if [[ $ORDERED == true ]]; then
	read -r ordered applied lag records fallbacks lost <<<"$(jfield ordered \
		epochs_applied apply_lag_epochs records fallbacks order_lost)"
	log "status: ordered $ordered, $applied epochs applied, lag $lag, records $records, fallbacks $fallbacks, order lost $lost"
	[[ $ordered == True && $lost == False ]] ||
		fail "wbctl status: ordered $ordered, order_lost $lost"
	((applied >= EPOCHS && lag == 0 && records == 0 && fallbacks == 0)) ||
		fail "wbctl status: $applied epochs applied, lag $lag, $records records, $fallbacks fallbacks"
	# The count may have grown since the JSON above: any count.
	remote_wbctl status >"$T/status.txt"
	grep -q "disk0: ordered writeback: [0-9]* epoch(s) applied" "$T/status.txt" ||
		fail "wbctl status has no ordered writeback line: $(cat "$T/status.txt")"
fi
stop_wbd
log "PASS"
