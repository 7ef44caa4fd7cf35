#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# io_threads_batch: the I/O threads (wbd-io-N) run as SCHED_BATCH by
# default, so that a request does not preempt the client that sent it on
# a shared CPU; no other thread does (the control thread, the flush
# workers), not even a flush worker an I/O thread started for a client's
# FLUSH (four clients of a writethrough export grow the pool at once): a
# new thread would keep its creator's SCHED_BATCH (Linux resets only
# real-time policies), so the pool starts each as SCHED_OTHER.  `wbctl
# status` says so, JSON and human.  They serve data as ever.  With
# io_threads_batch = false every thread runs as SCHED_OTHER and the status
# says nothing of SCHED_BATCH.  A value that is not true or false is
# refused with the file and its line.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need nbdcopy
need_python_nbd
WBCTL=${WBCTL:?meson sets WBCTL}

# policies: "comm policy" of every thread of wbd (stat field 41: 0
# SCHED_OTHER, 3 SCHED_BATCH).
policies() {
	local f line
	for f in /proc/"$WBD_PID"/task/*/stat; do
		{ read -r line <"$f"; } 2>/dev/null || continue
		# The name is in parentheses, without spaces in wbd's.
		awk '{ print $2, $41 }' <<<"$line"
	done
}

# serves: 4 MiB in and back out, byte for byte.
serves() {
	head -c $((4 << 20)) /dev/urandom >"$T/in"
	nbdcopy "$T/in" "$(uri_unix)" || fail "nbdcopy in failed"
	"$PYTHON" - "$(uri_unix)" "$T/in" <<'PY' || fail "the data read back differs"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
want = open(sys.argv[2], "rb").read()
sys.exit(0 if h.pread(len(want), 0) == want else 1)
PY
}

add_export disk0 64M rw
add_export_mode wt 64M writethrough
CONF_EXTRA='io_threads = 2;'
write_cache_config 32M 'min_workers = 1; max_workers = 6;'

start_wbd
policies >"$T/pol"
log "threads: $(tr '\n' ' ' <"$T/pol")"
[[ $(grep -c '^(wbd-io-[0-9]*) 3$' "$T/pol") == 2 ]] ||
	fail "expected both I/O threads at SCHED_BATCH: $(tr '\n' ' ' <"$T/pol")"
grep -v '^(wbd-io-' "$T/pol" | grep -vq ' 0$' &&
	fail "another thread at another policy: $(tr '\n' ' ' <"$T/pol")"
st=$("$WBCTL" -s "$T/control.sock" --json status)
[[ $(jq -c '.io_threads' <<<"$st") == '{"configured":2,"running":2,"batch":true,"batch_error":null}' ]] ||
	fail "status io_threads: $(jq -c .io_threads <<<"$st")"
"$WBCTL" -s "$T/control.sock" status | grep -q 'I/O threads.*2 running (io_threads 2), SCHED_BATCH$' ||
	fail "the human view does not say SCHED_BATCH: $("$WBCTL" -s "$T/control.sock" status | grep 'I/O threads')"
serves
log "four clients of a writethrough export: the pool grows"
pids=()
for i in 0 1 2 3; do
	"$PYTHON" - "$(uri_unix wt)" "$i" <<'PY' &
import nbd, os, sys, time
h = nbd.NBD()
h.connect_uri(sys.argv[1])
i = int(sys.argv[2])
buf = os.urandom(64 << 10)
until = time.monotonic() + 2
n = 0
while time.monotonic() < until:
    h.pwrite(buf, (i * 256 + n % 256) * (64 << 10) % (64 << 20), nbd.CMD_FLAG_FUA)
    h.flush()
    n += 1
PY
	pids+=($!)
done
for p in "${pids[@]}"; do
	wait "$p" || fail "a client failed"
done
policies >"$T/pol2"
log "threads: $(tr '\n' ' ' <"$T/pol2")"
(($(grep -c '^(flush-' "$T/pol2") > 1)) ||
	fail "the pool did not grow: $(tr '\n' ' ' <"$T/pol2")"
grep -v '^(wbd-io-' "$T/pol2" | grep -vq ' 0$' &&
	fail "a thread started since runs as SCHED_BATCH: $(tr '\n' ' ' <"$T/pol2")"
stop_wbd

log "io_threads_batch = false"
CONF_EXTRA='io_threads = 2; io_threads_batch = false;'
write_config
start_wbd
policies >"$T/pol"
grep -vq ' 0$' "$T/pol" && fail "a thread not at SCHED_OTHER: $(tr '\n' ' ' <"$T/pol")"
st=$("$WBCTL" -s "$T/control.sock" --json status)
[[ $(jq -r '.io_threads.batch' <<<"$st") == false ]] || fail "status: batch $(jq -c .io_threads <<<"$st")"
"$WBCTL" -s "$T/control.sock" status | grep 'I/O threads' | grep -q SCHED_BATCH &&
	fail "the human view says SCHED_BATCH with it off"
serves
stop_wbd

log "a value that is not true or false"
CONF_EXTRA='io_threads_batch = 1;'
write_config
rc=0
out=$(timeout 20 "$WBD" -n -c "$CONF" 2>&1) || rc=$?
[[ $rc == 1 ]] || fail "expected exit 1, got $rc: $out"
line=$(grep -n '^io_threads_batch' "$CONF" | cut -d: -f1)
grep -q "$CONF:$line: .*expected true or false" <<<"$out" ||
	fail "expected $CONF:$line and 'expected true or false': $out"
