#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The write log's space comes back, and a log larger than the cache is
# replayed whole.
#   - Reclaim: after a FLUSH through the log, writeback writes the data to
#     the remote and, within a few dirty_writeback intervals, a reclaim
#     flushes the remote and gives the log's space back: records 0, used 0,
#     and the remote holds the data.
#   - Replay larger than the cache: 48 MiB FLUSHed through the log (twelve
#     FLUSHes of 4 MiB) with a 32 MiB cache, no reclaim yet; kill -9; the
#     remote's file put back as it was (a remote that lost every write no
#     flush covered: none did); restart: the replay makes room by writing
#     back as it goes, every byte reads back, and after wbctl flush the
#     remote holds it.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd

truncate -s 64M "$T/remote.img"
cp "$T/remote.img" "$T/remote0.img"
start_nbdkit kit file "$T/remote.img"
add_remote_export disk0 "$(kit_uri "$KIT_SOCK")" \
	"journal = { path = \"$T/disk0.wal\"; size = \"16M\"; };"
write_cache_config 64M 'dirty_writeback_centisecs = 20;'
start_wbd

log "reclaim: 4 MiB FLUSHed through the log"
head -c 4M /dev/urandom >"$T/data"
"$PYTHON" - "$(uri_unix disk0)" "$T/data" <<'PY' || fail "writing through wbd failed"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(open(sys.argv[2], "rb").read(), 0)
h.flush()
h.shutdown()
PY
read -r commits <<<"$(jfield commits)"
((commits >= 1)) || fail "the FLUSH did not go through the log"
for ((i = 0; i < 100; i++)); do
	read -r records used reclaims <<<"$(jfield records used_bytes reclaims)"
	((records == 0 && used == 0 && reclaims >= 1)) && break
	sleep 0.1
done
((records == 0 && used == 0)) ||
	fail "the log's space did not come back within 10 s: records $records, used $used, reclaims $reclaims"
log "given back after $((i / 10)).$((i % 10)) s ($reclaims reclaim(s))"
cmp -s -n $((4 << 20)) "$T/data" "$T/remote.img" ||
	fail "the log was given back before the remote held the data"
stop_wbd

log "replay larger than the cache"
rm -f "$CONF" "$T/disk0.wal"
_EXPORTS=()
cp "$T/remote0.img" "$T/remote.img"
add_remote_export disk0 "$(kit_uri "$KIT_SOCK")" \
	"journal = { path = \"$T/disk0.wal\"; size = \"128M\"; };"
# No reclaim for a minute, so that the remote gets no flush.
write_cache_config 32M 'dirty_writeback_centisecs = 6000; dirty_expire_centisecs = 6000;'
start_wbd
head -c 48M /dev/urandom >"$T/data"
"$PYTHON" - "$(uri_unix disk0)" "$T/data" <<'PY' || fail "writing through wbd failed"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
data = open(sys.argv[2], "rb").read()
for off in range(0, len(data), 4 << 20):
    for o in range(off, off + (4 << 20), 1 << 20):
        h.pwrite(data[o:o + (1 << 20)], o)
    h.flush()
h.shutdown()
PY
read -r commits fallbacks reclaims logged <<<"$(jfield commits fallbacks reclaims logged_bytes)"
log "commits $commits, fallbacks $fallbacks, reclaims $reclaims, logged $logged bytes"
((fallbacks == 0 && reclaims == 0)) ||
	fail "a FLUSH was written back or reclaimed (the remote was flushed): the case needs none"
((logged >= 48 << 20)) || fail "the log took only $logged bytes"
kill -KILL "$WBD_PID"
wait_exit "$WBD_PID" 10 || fail "wbd still running after SIGKILL"
# No flush reached the remote: it may have lost all it was sent.
stop_kit "$KIT_PID"
cp "$T/remote0.img" "$T/remote.img"
start_nbdkit kit file "$T/remote.img"
: >"$LOG"
start_wbd
grep -q "replayed 48 record(s), 50331648 bytes" "$LOG" ||
	fail "the replay was not whole: $(grep 'write log' "$LOG")"
"$PYTHON" - "$(uri_unix disk0)" "$T/data" <<'PY' || fail "see above"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
data = open(sys.argv[2], "rb").read()
for off in range(0, len(data), 4 << 20):
    if h.pread(4 << 20, off) != data[off:off + (4 << 20)]:
        sys.exit("FAIL: bytes %d.. differ after the replay" % off)
h.shutdown()
PY
remote_wbctl flush disk0 >/dev/null || fail "wbctl flush failed"
cmp -s -n $((48 << 20)) "$T/data" "$T/remote.img" ||
	fail "after wbctl flush the remote does not hold the replayed data"
read -r records <<<"$(jfield records)"
((records == 0)) || fail "after wbctl flush the log still holds $records record(s)"
log "PASS"
