#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Writeback nobody waits for runs at writeback.background_nice
# (wbnice.h).  A remote takes 20 ms a write; 8 MiB of scattered 4K pages,
# no FLUSH, are written behind over about a second while a sampler reads
# every flush-MAJ:MIN thread's nice value from /proc.
#   1. background_nice = 7, wbd root (CAP_SYS_NICE): a flush thread is
#      seen at nice 7 while it writes behind, and every one is back at 0
#      once the data is clean; status says 7, applied.
#   2. wbctl tune background_nice=0: the next write-behind runs at 0.
#   3. user = "nobody" (no capability, RLIMIT_NICE 0): a thread could
#      raise its nice value but never take it back, so wbd does not:
#      the log says why, status says not applied, no thread is niced.
# Periodic writeback is off, so that no periodic pass raises a thread
# while the test looks for none.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl
need setpriv

# sample_nice OUT: until $T/sampling is removed, every flush thread's
# "comm nice" (field 19 of its stat) into OUT, each value once.
sample_nice() {
	local out=$1 f line
	: >"$out"
	while [[ -e $T/sampling ]]; do
		for f in /proc/"$WBD_PID"/task/*/stat; do
			{ read -r line <"$f"; } 2>/dev/null || continue
			[[ $line == *"(flush-"* ]] || continue
			awk '{ print $2, $19 }' <<<"$line" >>"$out"
		done
		sleep 0.005
	done
	sort -u -o "$out" "$out"
}

# behind_sampled TAG SEED: write 8 MiB behind, sampling meanwhile, until
# clean; the samples in $T/nice-TAG.
behind_sampled() {
	touch "$T/sampling"
	sample_nice "$T/nice-$1" &
	local sp=$!
	write_scattered_pages "$(uri_unix slow)" "$T/img-$1" "$2" 2048 32 1 ||
		fail "the writes failed"
	wait_clean 60
	rm -f "$T/sampling"
	wait "$sp"
	log "$1: flush threads seen at: $(tr '\n' ' ' <"$T/nice-$1")"
}

# flush_threads_nice: every flush thread's nice value now, one a line.
flush_threads_nice() {
	local f line
	for f in /proc/"$WBD_PID"/task/*/stat; do
		{ read -r line <"$f"; } 2>/dev/null || continue
		[[ $line == *"(flush-"* ]] && awk '{ print $19 }' <<<"$line"
	done
}

start_nbdkit slow --filter=delay memory 64M delay-write=20ms
chmod 0711 "$T"
chmod 0666 "$KIT_SOCK"
add_remote_export slow "$(kit_uri "$KIT_SOCK")"
KEYS='dirty_background_ratio = 50; dirty_ratio = 60; dirty_writeback_centisecs = 0;'

log "1. background_nice = 7, wbd with CAP_SYS_NICE"
write_cache_config 64M "$KEYS background_nice = 7;"
start_wbd
st=$(remote_wbctl status --json)
[[ $(jq -r '.thresholds.background_nice' <<<"$st") == 7 ]] ||
	fail "status: background_nice $(jq -c .thresholds <<<"$st")"
[[ $(jq -r '.thresholds.background_nice_applied' <<<"$st") == true ]] ||
	fail "status: not applied as root"
remote_wbctl status | grep -Eq '^ +background_nice +7$' ||
	fail "the human view does not show background_nice 7"
behind_sampled one 1
grep -q ' 7$' "$T/nice-one" || fail "no flush thread was seen at nice 7 while writing behind"
grep -Evq ' (0|7)$' "$T/nice-one" && fail "a flush thread at another nice value"
[[ -z $(flush_threads_nice | grep -v '^0$') ]] ||
	fail "a flush thread kept its nice value after the writeback: $(flush_threads_nice | tr '\n' ' ')"
remote_read "$KIT_SOCK" 0 $((32 << 20)) "$T/remote"
cmp "$T/img-one" "$T/remote" || fail "nbdkit does not hold what was written"
log "2. tune background_nice=0: no thread niced"
remote_wbctl tune background_nice=0 >/dev/null || fail "tune failed"
behind_sampled two 2
grep -Evq ' 0$' "$T/nice-two" && fail "a flush thread was niced after background_nice=0: $(tr '\n' ' ' <"$T/nice-two")"
grep -q ' 0$' "$T/nice-two" || fail "no flush thread sampled at all"
stop_wbd

log "3. user = nobody: not applied, and said"
# No RLIMIT_NICE to go back with (the usual one: 0), whatever this shell
# was given.
ulimit -S -e 0
CONF_EXTRA='user = "nobody";'
write_cache_config 64M "$KEYS background_nice = 7;"
start_wbd
grep -q 'writeback.background_nice = 7 is not applied: a thread could not take its priority back' "$LOG" ||
	fail "the log does not say background_nice is not applied"
st=$(remote_wbctl status --json)
[[ $(jq -r '.thresholds.background_nice_applied' <<<"$st") == false ]] ||
	fail "status: applied without the right to take a priority back"
remote_wbctl status | grep -q 'background_nice.*7 (not applied' ||
	fail "the human view does not say not applied"
behind_sampled three 3
grep -Evq ' 0$' "$T/nice-three" && fail "a flush thread was niced with no right to take it back: $(tr '\n' ' ' <"$T/nice-three")"
grep -q ' 0$' "$T/nice-three" || fail "no flush thread sampled at all"
