#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A journaled export keeps what it acknowledged across a kill -9 while its
# remote is down (docs/journal.md).  With mode "on-flush" a FLUSH is
# answered from the write log although the remote is stopped; wbd is then
# killed with SIGKILL and started again with the remote still down: the
# log is replayed and the export served at once, every FLUSHed byte reads
# back from the cache, and new whole-page writes and a FLUSH are taken
# into the log, all with no remote; then the remote is started: every
# byte reaches it.  With "on-write" the same holds for writes never
# flushed.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd

# on-flush, then on-write.
for mode in on-flush on-write; do
	log "mode $mode"
	rm -f "$T/remote.img" "$T/disk0.wal" "$CONF"
	: >"$LOG"
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
	# A new log, so that start_wbd waits for this run's ready line
	# (after the replay), not the last one's.
	: >"$LOG"
	start_wbd
	grep -q 'export "disk0": its remote does not answer, but its write log' "$LOG" ||
		fail "the export was not served from its log with the remote down"
	# The warning quotes the failed attempt, which names the URI: once.
	line=$(grep 'not connected yet' "$LOG" | tail -1)
	[[ -n $line ]] || fail "no \"not connected yet\" warning"
	uris=$(grep -oF "socket=$T/kit.sock" <<<"$line" | wc -l)
	((uris == 1)) || fail "the warning names the remote $uris times: $line"
	grep -q "write log .*replayed" "$LOG" || fail "no replay in the log"
	# Served with no remote: what the log held reads back from the cache,
	# and whole-page writes and a FLUSH go into the log (a partial page
	# would need the remote to be read in).
	head -c 1M /dev/urandom >"$T/data2"
	"$PYTHON" - "$(uri_unix disk0)" "$T/data" "$T/data2" <<'PY' || fail "see above"
import nbd, sys
data = open(sys.argv[2], "rb").read()
data2 = open(sys.argv[3], "rb").read()
h = nbd.NBD()
h.connect_uri(sys.argv[1])
got = h.pread(len(data), 1000)
if got != data:
    bad = next(i for i in range(len(data)) if got[i] != data[i])
    sys.exit("FAIL: with the remote down, the data read back after the "
             "replay differs at byte %d" % (bad + 1000))
h.pwrite(data2, 16 << 20)
h.flush()
h.shutdown()
PY
	remote_wbctl status --json >"$T/status.json"
	"$PYTHON" - "$T/status.json" <<'PY' || fail "see above"
import json, sys
st = json.load(open(sys.argv[1]))
e = st["exports"][0]
if e["name"] != "disk0" or e["journal"]["replay"]["records"] < 1:
    sys.exit("FAIL: the export is not served with its replay: %s" % e)
PY
	log "killing wbd again, then starting it with the remote still down"
	kill -KILL "$WBD_PID"
	wait_exit "$WBD_PID" 10 || fail "wbd still running after SIGKILL"
	: >"$LOG"
	start_wbd
	log "starting the remote"
	start_nbdkit kit file "$T/remote.img"
	"$PYTHON" - "$(uri_unix disk0)" "$T/data" "$T/data2" <<'PY' || fail "see above"
import nbd, sys
data = open(sys.argv[2], "rb").read()
data2 = open(sys.argv[3], "rb").read()
h = nbd.NBD()
h.connect_uri(sys.argv[1])
for what, want, off in (("first", data, 1000), ("second", data2, 16 << 20)):
    got = h.pread(len(want), off)
    if got != want:
        bad = next(i for i in range(len(want)) if got[i] != want[i])
        sys.exit("FAIL: the %s data read back after the replays differs "
                 "at byte %d" % (what, bad + off))
h.shutdown()
PY
	# wbctl flush writes back and flushes the backing device (a FLUSH
	# is answered from the log).
	remote_wbctl flush disk0 >/dev/null || fail "wbctl flush failed"
	"$PYTHON" - "$T/data" "$T/data2" "$T/remote.img" <<'PY' || fail "see above"
import sys
data = open(sys.argv[1], "rb").read()
data2 = open(sys.argv[2], "rb").read()
img = open(sys.argv[3], "rb")
img.seek(1000)
if img.read(len(data)) != data:
    sys.exit("FAIL: after wbctl flush the remote does not hold the data")
img.seek(16 << 20)
if img.read(len(data2)) != data2:
    sys.exit("FAIL: after wbctl flush the remote does not hold the data "
             "written while it was down")
PY
	remote_wbctl status --json >"$T/status.json"
	stop_wbd
	# A clean stop leaves an empty log: a start now replays nothing.
	: >"$LOG"
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
