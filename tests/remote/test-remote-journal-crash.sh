#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A journaled export keeps what it acknowledged across a kill -9 while its
# remote is down (docs/journal.md).  With mode "on-flush" a FLUSH is
# answered from the write log although the remote is stopped; wbd is then
# killed with SIGKILL, started again with the remote still down (the
# export waits for it), then the remote: the log is replayed, every
# FLUSHed byte reads back and, after a FLUSH, is on the remote.  With
# "on-write" the same holds for writes never flushed.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd

# on-flush, then on-write.
for mode in on-flush on-write; do
	log "mode $mode"
	rm -f "$T/remote.img" "$T/disk0.wal" "$CONF"
	_EXPORTS=()
	truncate -s 64M "$T/remote.img"
	start_nbdkit kit file "$T/remote.img"
	add_remote_export disk0 "$(kit_uri "$KIT_SOCK")" \
		"journal = { path = \"$T/disk0.wal\"; size = \"32M\"; mode = \"$mode\"; };"
	write_cache_config 128M 'dirty_background_bytes = "64M"; dirty_bytes = "100M"; dirty_writeback_centisecs = 0; dirty_expire_centisecs = 0;'
	add_remote_settings 'connect_timeout_ms = 1000; reconnect_max_ms = 300; io_timeout_ms = 1500; write_behind = false;'
	start_wbd
	head -c 8M /dev/urandom >"$T/data"
	# The pages around unaligned writes are read in now: with the remote
	# down, a partial page not in the cache could not be.
	"$PYTHON" - "$(uri_unix disk0)" <<'PY' || fail "reading through wbd failed"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
for off in range(0, 10 << 20, 1 << 20):
    h.pread(1 << 20, off)
h.shutdown()
PY

	log "stopping the remote, then writing through wbd"
	stop_kit "$KIT_PID" KILL
	# Writes land in the cache; with on-flush one FLUSH covers them,
	# answered from the log with the remote down.  Unaligned pieces, so
	# that pages are logged whole around them.
	"$PYTHON" - "$(uri_unix disk0)" "$T/data" "$mode" <<'PY' || fail "writing through wbd failed"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
data = open(sys.argv[2], "rb").read()
step = 65536 + 512
for off in range(0, len(data), step):
    h.pwrite(data[off:off + step], off + 1000)
if sys.argv[3] == "on-flush":
    h.flush()
h.shutdown()
PY
	remote_wbctl status --json >"$T/status.json"
	"$PYTHON" - "$T/status.json" "$mode" <<'PY' || fail "see above"
import json, sys
st = json.load(open(sys.argv[1]))
j = st["exports"][0]["journal"]
if j is None:
    sys.exit("FAIL: wbctl status shows no journal")
if j["mode"] != sys.argv[2] or j["broken"]:
    sys.exit("FAIL: journal %s" % j)
if j["commits"] < 1 or j["logged_bytes"] < 8 << 20:
    sys.exit("FAIL: the log took too little: %s" % j)
if j["records"] < 1 or j["used_bytes"] <= 0:
    sys.exit("FAIL: the log holds nothing: %s" % j)
PY
	log "killing wbd with SIGKILL"
	kill -KILL "$WBD_PID"
	wait_exit "$WBD_PID" 10 || fail "wbd still running after SIGKILL"

	log "starting wbd again, the remote still down"
	start_wbd
	grep -q 'export "disk0": its remote .* does not answer' "$LOG" ||
		fail "the export did not wait for its remote"
	log "starting the remote"
	start_nbdkit kit file "$T/remote.img"
	for ((i = 0; i < 150; i++)); do
		grep -q "write log .*replayed" "$LOG" && break
		sleep 0.1
	done
	grep -q "write log .*replayed" "$LOG" || fail "no replay in the log"
	for ((i = 0; i < 100; i++)); do
		remote_wbctl status --json 2>/dev/null | grep -q '"disk0"' && break
		sleep 0.1
	done
	"$PYTHON" - "$(uri_unix disk0)" "$T/data" "$T/remote.img" <<'PY' || fail "see above"
import nbd, sys, time
data = open(sys.argv[2], "rb").read()
h = nbd.NBD()
for i in range(100):
    try:
        h.connect_uri(sys.argv[1])
        break
    except nbd.Error:
        time.sleep(0.1)
        h = nbd.NBD()
got = h.pread(len(data), 1000)
if got != data:
    bad = next(i for i in range(len(data)) if got[i] != data[i])
    sys.exit("FAIL: the data read back after the replay differs at byte %d"
             % (bad + 1000))
h.shutdown()
PY
	# wbctl flush writes back and flushes the backing device (a FLUSH
	# is answered from the log).
	remote_wbctl flush disk0 >/dev/null || fail "wbctl flush failed"
	"$PYTHON" - "$T/data" "$T/remote.img" <<'PY' || fail "see above"
import sys
data = open(sys.argv[1], "rb").read()
img = open(sys.argv[2], "rb")
img.seek(1000)
if img.read(len(data)) != data:
    sys.exit("FAIL: after wbctl flush the remote does not hold the data")
PY
	remote_wbctl status --json >"$T/status.json"
	stop_wbd
	# A clean stop leaves an empty log: a start now replays nothing.
	start_wbd
	remote_wbctl status --json >"$T/status2.json"
	"$PYTHON" - "$T/status2.json" <<'PY' || fail "see above"
import json, sys
j = json.load(open(sys.argv[1]))["exports"][0]["journal"]
if j["replay"]["records"] != 0 or j["records"] != 0:
    sys.exit("FAIL: after a clean stop the log still held records: %s" % j)
PY
	stop_wbd
	stop_kit "$KIT_PID"
done
log "PASS"
