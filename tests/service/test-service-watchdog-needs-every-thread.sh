#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# WATCHDOG=1 is sent only while every thread answers: with the one worker
# of a device stuck in a slow write (an nbdkit remote that takes 8 s per
# write, max_workers = 1), the watchdog ping queued on that device's pool
# is not run, wbd says which thread is silent and stops feeding the
# watchdog; once the write completes it answers again and so do the
# WATCHDOG=1 messages.
source "${SRCDIR:?SRCDIR must name tests/service}/lib-service.sh"
need nbdkit
need_python_nbd

KIT=$T/kit.sock
nbdkit -f -U "$KIT" --filter=delay memory 16M delay-write=8 \
	>>"$T/nbdkit.log" 2>&1 &
_PIDS+=("$!")
for ((i = 0; i < 100; i++)); do
	[[ -S $KIT ]] && break
	sleep 0.1
done
[[ -S $KIT ]] || fail "nbdkit did not start: $(cat "$T/nbdkit.log")"

_EXPORTS+=("  { name = \"disk0\"; backing = \"nbd+unix:///?socket=$KIT\"; }")
write_cache_config 64M "min_workers = 1; max_workers = 1; dirty_writeback_centisecs = 0;"
start_notify_listener
export NOTIFY_SOCKET=$NOTIFY WATCHDOG_USEC=1000000
start_wbd
unset NOTIFY_SOCKET WATCHDOG_USEC
wait_note '^READY=1$' 30
wait_note '^WATCHDOG=1$' 10 "$NOTE_LINE"

# One write and a FLUSH: the device's only worker spends 8 s writing it.
"$PYTHON" - "$(uri_unix)" >"$T/client.log" 2>&1 <<'PY' &
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(b"\x5a" * 4096, 0)
h.flush()
h.shutdown()
PY
client=$!
_PIDS+=("$client")

wait_log 'watchdog: the workers of device 43:[0-9]* \(flush-43:[0-9]*\) did not answer' 10 ||
	fail "no thread was reported silent while the worker was stuck"
mark=$(notes_lines)
wait_log 'watchdog: every thread answers again' 30 ||
	fail "the threads did not answer again after the slow write"
fed=$(tail -n +"$((mark + 1))" "$NOTES" | grep -c '^WATCHDOG=1$' || true)
# The recovery's own WATCHDOG=1 may already be there.
((fed <= 1)) || fail "$fed WATCHDOG=1 sent while a device's worker was stuck"
wait_note '^WATCHDOG=1$' 10 "$mark"
wait_exit "$client" 30 || fail "the client's FLUSH did not return"
[[ $EXIT_STATUS == 0 ]] || fail "the client failed: $(cat "$T/client.log")"
log "the watchdog went hungry while a pool was stuck, and was fed again after"
