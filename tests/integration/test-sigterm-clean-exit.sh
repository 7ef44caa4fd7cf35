#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# SIGTERM (and SIGINT) stop wbd cleanly: with an idle client connected it
# exits 0 within a bounded time, data written without an explicit flush is in
# the backing file, and a new daemon starts on the same socket afterwards.
# A SIGTERM during a large copy also ends in exit 0.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd
need nbdcopy cmp

add_export disk0 16M rw
start_wbd

head -c 8M /dev/urandom >"$T/data.bin"
# No --flush: the daemon's shutdown must make the data durable.
nbdcopy "$T/data.bin" "$(uri_unix disk0)" || fail "nbdcopy into the export failed"

# An idle client stays connected through the signal.
"$PYTHON" - "$(uri_unix disk0)" >"$T/idle.out" 2>&1 <<'PY' &
import nbd, sys, time
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pread(4096, 0)
time.sleep(60)
PY
idle_pid=$!
_PIDS+=("$idle_pid")
sleep 0.5

log "SIGTERM with an idle client"
stop_wbd "$WBD_PID" TERM 15
[[ $EXIT_STATUS == 0 ]] || fail "wbd exited with status $EXIT_STATUS after SIGTERM, expected 0"
cmp -n $((8 << 20)) "$T/data.bin" "$T/disk0.img" ||
	fail "the data written before SIGTERM is not in the backing file"
kill "$idle_pid" 2>/dev/null || true

log "restart on the same socket and port, then SIGINT"
start_wbd
nbdcopy "$(uri_unix disk0)" "$T/out.bin" || fail "nbdcopy from the restarted daemon failed"
cmp -n $((8 << 20)) "$T/data.bin" "$T/out.bin" || fail "the restarted daemon serves other data"
head -c 4M /dev/urandom >"$T/data2.bin"
nbdcopy "$T/data2.bin" "$(uri_tcp disk0)" || fail "nbdcopy over TCP failed"
stop_wbd "$WBD_PID" INT 15
[[ $EXIT_STATUS == 0 ]] || fail "wbd exited with status $EXIT_STATUS after SIGINT, expected 0"
cmp -n $((4 << 20)) "$T/data2.bin" "$T/disk0.img" ||
	fail "the data written before SIGINT is not in the backing file"

log "SIGTERM in the middle of a copy"
start_wbd
head -c 16M /dev/urandom >"$T/big.bin"
nbdcopy --requests=32 "$T/big.bin" "$(uri_unix disk0)" >"$T/copy.out" 2>&1 &
copy_pid=$!
_PIDS+=("$copy_pid")
sleep 0.2
stop_wbd "$WBD_PID" TERM 30
[[ $EXIT_STATUS == 0 ]] ||
	fail "wbd exited with status $EXIT_STATUS after SIGTERM during a copy, expected 0"
wait_exit "$copy_pid" 15 || fail "nbdcopy hangs after the daemon exited"
