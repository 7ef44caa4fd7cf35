#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# journal.ordered switched on a log that holds records, both ways, with a
# kill -9 in between: nothing FLUSHed is lost, and a log written unordered
# is never applied as epochs (docs/journal.md, "Switching ordered").
#   - false -> true: 30 epochs (tests/remote/epochs.py) FLUSHed into an
#     unordered log, writeback held off (no write-behind, no periodic
#     writeback), so they are in the log only; SIGKILL; the remote stopped.
#     wbd restarted with ordered = true says so, and the export waits for
#     its remote (its records are written back before the first epoch);
#     once the remote is back, the export is served, the remote holds every
#     epoch, the log is empty and ordered.
#   - true -> false: on a zeroed remote, behind nbdkit's delay filter
#     (150 ms a write) so that epochs wait to be applied, 30 epochs FLUSHed
#     into an ordered log; SIGKILL with epochs not yet applied (the remote
#     then at whole epochs, in order).  wbd restarted with ordered = false
#     says so, writes the records back from the cache, and the remote ends
#     with every epoch; the log is unordered and empty.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl
nbdkit --filter=delay null --dump-plugin >/dev/null 2>&1 ||
	skip "nbdkit's delay filter is not installed"

EPOCHS=30
epochs_checker "$EPOCHS"

# config ORDERED: the export, over the remote on $T/kit.sock, its log
# $T/disk0.wal ordered or not; writeback leaves it alone.
config() {
	_EXPORTS=()
	add_remote_export disk0 "$(kit_uri "$T/kit.sock")" \
		"size = \"16M\"; journal = { path = \"$T/disk0.wal\"; size = \"64M\"; ordered = $1; };"
	write_cache_config 64M 'dirty_background_ratio = 80; dirty_ratio = 90; dirty_writeback_centisecs = 360000; dirty_expire_centisecs = 360000;'
	add_remote_settings 'write_behind = false;'
}

# records_when_served SECONDS: the log's records once the export is
# served (status shows it), or fail.
records_when_served() {
	local i r
	for ((i = 0; i < $1 * 10; i++)); do
		r=$(jfield records 2>/dev/null) && { echo "$r"; return 0; }
		sleep 0.1
	done
	fail "export disk0 not served after $1 s: $(grep disk0 "$LOG" | tail -3)"
}

truncate -s 16M "$T/remote.img"

log "ordered = false -> true"
start_nbdkit kit file "$T/remote.img"
config false
start_wbd
"$PYTHON" "$SRCDIR/epochs.py" write "$(uri_unix disk0)" "$EPOCHS" >"$T/writer.out" 2>&1 ||
	fail "the writer failed: $(cat "$T/writer.out")"
read -r records ordered <<<"$(jfield records ordered)"
((records > 0)) && [[ $ordered == False ]] ||
	fail "the unordered log holds $records record(s), ordered $ordered"
kill -KILL "$WBD_PID"
wait_exit "$WBD_PID" 10 || fail "wbd still running after SIGKILL"
stop_kit "$KIT_PID"
! "$PYTHON" "$SRCDIR/epochs.py" final "$T/remote.img" "$EPOCHS" >/dev/null 2>&1 ||
	fail "the remote holds every epoch already: nothing left for the log"
log "after the kill the remote lacks epochs; $records record(s) in the log"

: >"$LOG"
config true
start_wbd
wait_log 5 'waiting for its remote to replay the log' || true
grep -q "write log $T/disk0.wal was written with ordered = false and holds [0-9]* record(s): with ordered = true they are written back before the first epoch, and the backing device does not answer; waiting for its remote" "$LOG" ||
	fail "the export does not wait for its remote to write the unordered records back: $(grep disk0 "$LOG")"
start_nbdkit kit file "$T/remote.img"
records=$(records_when_served 30)
grep -q "export \"disk0\": write log $T/disk0.wal was written with ordered = false and is opened with ordered = true: its [0-9]* record(s) replayed are written back from the cache and flushed before ordered writeback begins" "$LOG" ||
	fail "the switch to ordered was not logged: $(grep 'write log' "$LOG")"
"$PYTHON" "$SRCDIR/epochs.py" final "$T/remote.img" "$EPOCHS" ||
	fail "served with ordered = true before the remote held every FLUSHed epoch"
read -r records ordered <<<"$(jfield records ordered)"
((records == 0)) && [[ $ordered == True ]] ||
	fail "after the switch the log holds $records record(s), ordered $ordered"
stop_wbd
stop_kit "$KIT_PID"

log "ordered = true -> false"
truncate -s 0 "$T/remote.img"
truncate -s 16M "$T/remote.img"
LAST_K=0
start_nbdkit kit --filter=delay file "$T/remote.img" delay-write=150ms
: >"$LOG"
config true
start_wbd
"$PYTHON" "$SRCDIR/epochs.py" write "$(uri_unix disk0)" "$EPOCHS" >"$T/writer.out" 2>&1 ||
	fail "the writer failed: $(cat "$T/writer.out")"
read -r lag records ordered <<<"$(jfield apply_lag_epochs records ordered)"
((lag > 0 && records > 0)) && [[ $ordered == True ]] ||
	fail "the ordered log: lag $lag epoch(s), $records record(s), ordered $ordered: nothing left to kill mid-apply"
kill -KILL "$WBD_PID"
wait_exit "$WBD_PID" 10 || fail "wbd still running after SIGKILL"
restart_kit_after_kill
sample
log "after the kill the remote is at epoch $K, $lag epoch(s) were not applied"
((K < EPOCHS)) || fail "the remote holds every epoch already: the kill came too late"

: >"$LOG"
config false
start_wbd
grep -q "export \"disk0\": write log $T/disk0.wal was written with ordered = true and is opened with ordered = false: its [0-9]* record(s) replayed are written back from the cache, out of order" "$LOG" ||
	fail "the switch to unordered was not logged: $(grep 'write log' "$LOG")"
remote_wbctl flush disk0 >/dev/null || fail "wbctl flush failed"
"$PYTHON" "$SRCDIR/epochs.py" final "$T/remote.img" "$EPOCHS" ||
	fail "after the switch to unordered the remote lacks FLUSHed epochs"
read -r ordered <<<"$(jfield ordered)"
[[ $ordered == False ]] || fail "the log is ordered $ordered after the switch"
stop_wbd
log "PASS"
