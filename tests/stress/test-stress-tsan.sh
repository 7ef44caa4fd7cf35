#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Every thread of wbd at once, for ThreadSanitizer: four fio writers with
# verify (two on each of two exports) write through a 16M cache, so
# background and periodic writeback and eviction all run under them, while
# every second the thresholds, the workers, a device's max_ratio and an
# export's cache mode are tuned, and the configuration is reloaded (wbctl
# reload and SIGHUP in turn, adding and removing a third export), and
# wbctl status is polled all the while.  disk1 has a write log: the
# writers' fsyncs (one every 8 writes) are its commits, and its writes
# while it is writethrough its on-write path; its reclaim runs every
# dirty_writeback interval.  After STRESS_SECONDS (default 40)
# wbd gets SIGTERM and must exit 0.  Fails on any ThreadSanitizer report in
# the daemon's log (lib.sh checks every log at exit), on a fio verify error,
# or on a control command that fails.
#
# Meant for the TSan build (scripts/test-tsan.sh); it runs, more slowly and
# less usefully, in any build.  Suite "stress", which plain `meson test`
# leaves out.
source "${SRCDIR:-$(dirname "$0")}/../ctl/lib-ctl.sh"
need fio
fio --enghelp 2>/dev/null | grep -qw nbd || skip "this fio has no nbd engine"

STRESS_SECONDS=${STRESS_SECONDS:-40}
# Go on after a report (every race in one run), and name both stacks of a
# lock-order inversion.  The suppressions cover uninstrumented libraries
# only; see the file.
export TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1 history_size=4 suppressions=$SRCDIR/tsan.supp ${TSAN_OPTIONS:-}"

wb_keys='dirty_background_ratio = 10; dirty_ratio = 30; dirty_expire_centisecs = 100; dirty_writeback_centisecs = 50; min_workers = 1; max_workers = 4;'
add_export_mode disk0 64M writeback
add_export_mode disk1 64M writeback
# journal_disk1 FILE: disk1 with its write log.
journal_disk1() {
	sed -i "s|\(name = \"disk1\";.*\) }\(,\?\)$|\1 journal = { path = \"$T/disk1.wal\"; size = \"8M\"; }; }\2|" "$1"
	grep -q 'disk1.wal' "$1" || fail "no journal for disk1 in $1"
}
write_cache_config 16M "$wb_keys"
journal_disk1 "$CONF"
cp "$CONF" "$T/conf-two"
add_export_mode extra 8M writeback
write_cache_config 16M "$wb_keys"
journal_disk1 "$CONF"
cp "$CONF" "$T/conf-three"
cp "$T/conf-two" "$CONF"
start_wbd
DEV=$(dev_majmin "$T/disk0.img")

STOP=$T/stop
BG_PIDS=()

# writer EXPORT: fio (two jobs, each its own 16M of EXPORT, verify) again
# and again until $STOP exists; a failure leaves $T/fio-EXPORT.failed.
writer() {
	local name=$1 round=0
	while [[ ! -e $STOP ]]; do
		round=$((round + 1))
		if ! fio --name="$name" --ioengine=nbd --uri="$(uri_unix "$name")" \
			--rw=randwrite --bsrange=4k-64k --size=16M --fsync=8 \
			--offset_increment=16M --numjobs=2 --iodepth=4 \
			--randrepeat=0 --verify=crc32c --verify_fatal=1 \
			--verify_state_save=0 --group_reporting \
			--output="$T/fio-$name.out" >/dev/null 2>&1 ||
		   ! grep -q 'err= 0' "$T/fio-$name.out"; then
			cp "$T/fio-$name.out" "$T/fio-$name.failed" 2>/dev/null ||
				echo "fio did not run" >"$T/fio-$name.failed"
			return
		fi
		echo "$round" >"$T/fio-$name.rounds"
	done
}

# control_failed WHAT: note a failed control command for the end.
control_failed() {
	echo "$*" >>"$T/control.failed"
}

# poller: wbctl status as fast as it answers.
poller() {
	local n=0
	while [[ ! -e $STOP ]]; do
		wbctl --json status >/dev/null 2>>"$T/status.err" ||
			control_failed "wbctl status"
		n=$((n + 1))
	done
	echo "$n" >"$T/status.count"
}

# tuner: every second one set of tunes, then a reload (wbctl reload and
# SIGHUP in turn), the config alternately with and without "extra".
tuner() {
	local i=0 lo hi mode conf
	while [[ ! -e $STOP ]]; do
		if ((i % 2)); then
			lo=5 hi=20 mode=writethrough conf=conf-three
			wbctl tune min_workers=2 max_workers=6 >/dev/null ||
				control_failed "tune workers (round $i)"
		else
			lo=15 hi=40 mode=writeback conf=conf-two
			wbctl tune min_workers=1 max_workers=2 >/dev/null ||
				control_failed "tune workers (round $i)"
		fi
		wbctl tune dirty_background_ratio=$lo dirty_ratio=$hi \
			dirty_expire_centisecs=$((50 + i % 100)) >/dev/null ||
			control_failed "tune thresholds (round $i)"
		wbctl tune "device.$DEV.max_ratio=$((i % 2 ? 50 : 100))" \
			"export.disk1.cache_mode=$mode" >/dev/null ||
			control_failed "tune device and cache mode (round $i)"
		cp "$T/$conf" "$CONF"
		if ((i % 4 < 2)); then
			wbctl reload >>"$T/reload.out" 2>&1 ||
				control_failed "wbctl reload (round $i)"
		else
			kill -HUP "$WBD_PID" || control_failed "SIGHUP (round $i)"
		fi
		i=$((i + 1))
		echo "$i" >"$T/tune.rounds"
		sleep 1
	done
}

log "stress for ${STRESS_SECONDS}s: 2x2 fio writers, tune and reload every second, status polling"
for f in writer:disk0 writer:disk1 poller tuner; do
	"${f%%:*}" "${f#*:}" &
	BG_PIDS+=($!)
	_PIDS+=($!)
done

for ((s = 0; s < STRESS_SECONDS; s++)); do
	sleep 1
	assert_alive
	ls "$T"/fio-*.failed >/dev/null 2>&1 && break
done
touch "$STOP"
# A fio round in flight finishes (writes and verifies its 32M) first.
for pid in "${BG_PIDS[@]}"; do
	wait_exit "$pid" 180 || fail "a stress loop (pid $pid) did not end within 180 s"
done

for name in disk0 disk1; do
	if [[ -e $T/fio-$name.failed ]]; then
		cat "$T/fio-$name.failed" >&2
		fail "fio on $name failed or found corrupted data"
	fi
done
[[ -e $T/control.failed ]] &&
	fail "control commands failed: $(sort "$T/control.failed" | uniq -c | head) $(tail -n 5 "$T/status.err" "$T/reload.out" 2>/dev/null)"

log "fio rounds: disk0 $(cat "$T/fio-disk0.rounds" 2>/dev/null || echo 0)," \
	"disk1 $(cat "$T/fio-disk1.rounds" 2>/dev/null || echo 0);" \
	"tune+reload rounds $(cat "$T/tune.rounds" 2>/dev/null || echo 0);" \
	"status polls $(cat "$T/status.count" 2>/dev/null || echo 0)"
[[ -s $T/fio-disk0.rounds && -s $T/fio-disk1.rounds ]] ||
	fail "a fio writer did not complete one round in ${STRESS_SECONDS}s"

# The point was writeback and eviction under the tunes: both happened.
expect_exit 0 wbctl --json status
read -r evictions written commits < <("$SYSPY" -c 'import json, sys
s = json.load(sys.stdin)
j = [e for e in s["exports"] if e["name"] == "disk1"][0]["journal"]
print(s["cache"]["evictions"], sum(d["written_bytes"] for d in s["devices"]),
      j["commits"] + j["fallbacks"] if j else 0)' <<<"$OUT")
log "cache evictions $evictions, bytes written back $written, disk1's log commits and fallbacks $commits"
((commits > 0)) || fail "disk1's write log saw no FLUSH"
((evictions > 0)) || fail "no page was evicted: the cache was not under pressure"
((written > 0)) || fail "nothing was written back"

stop_wbd "$WBD_PID" TERM 120
[[ $EXIT_STATUS == 0 ]] || fail "wbd exited with status $EXIT_STATUS after SIGTERM"
if grep -q 'WARNING: ThreadSanitizer' "$LOG"; then
	grep -A3 'WARNING: ThreadSanitizer' "$LOG" | grep -E '^ +#0|WARNING' |
		sort | uniq -c | sort -rn | head -40 >&2
	fail "ThreadSanitizer reports in the daemon's log ($(grep -c 'WARNING: ThreadSanitizer' "$LOG"))"
fi
