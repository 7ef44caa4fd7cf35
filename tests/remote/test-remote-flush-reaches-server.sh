#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Writes through wbd stay in its cache (periodic writeback off) until a
# FLUSH; after the FLUSH, nbdkit itself holds them.  A FUA write is on
# nbdkit when its reply arrives, sent as a write with FUA and nothing
# else (a remote without FUA gets the write and a FLUSH).  nbdkit's log
# filter shows the FLUSH reaching it after the writes.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd

# The fua filter's default mode (none) hides FUA from wbd.
start_nbdkit nofua --filter=log --filter=fua memory 8M \
	logfile="$T/nofua-requests.log"
add_remote_export nofua "$(kit_uri "$KIT_SOCK")"
start_nbdkit kit --filter=log memory 32M logfile="$T/kit-requests.log"
add_remote_export disk0 "$(kit_uri "$KIT_SOCK")"
write_cache_config 64M 'dirty_background_ratio = 80; dirty_ratio = 90; dirty_writeback_centisecs = 0;'
# Writes stay in the cache until the FLUSH: no write-behind (nor its
# commits).
add_remote_settings 'write_behind = false;'
start_wbd

"$PYTHON" - "$(uri_unix disk0)" "$(kit_uri "$KIT_SOCK")" "$T/kit-requests.log" \
	"$(uri_unix nofua)" "$T/nofua-requests.log" <<'PY' || fail "see above"
import nbd, os, sys
wbd_uri, kit_uri, log_path, nofua_wbd, nofua_log = sys.argv[1:6]

kit = nbd.NBD()
kit.connect_uri(kit_uri)
h = nbd.NBD()
h.connect_uri(wbd_uri)

data = os.urandom(4 << 20)
h.pwrite(data, 1 << 20)
if kit.pread(len(data), 1 << 20) == data:
    sys.exit("FAIL: the write reached nbdkit before any FLUSH; the test "
             "cannot tell")
h.flush()
if kit.pread(len(data), 1 << 20) != data:
    sys.exit("FAIL: after FLUSH nbdkit does not hold the data written")

# A plain write left dirty, then FUA writes: each reaches nbdkit as a
# write with FUA, and nothing else is written or flushed for them.
plain = os.urandom(65536)
h.pwrite(plain, 8 << 20)
log_mark = os.path.getsize(log_path)
for off, n in [(0, 4096), (12345, 777), ((20 << 20) + 1, 70000)]:
    buf = os.urandom(n)
    h.pwrite(buf, off, nbd.CMD_FLAG_FUA)
    if kit.pread(n, off) != buf:
        sys.exit("FAIL: FUA write [%d, +%d) not on nbdkit at its reply"
                 % (off, n))
with open(log_path) as f:
    f.seek(log_mark)
    lines = [l for l in f.read().splitlines() if " Write " in l or " Flush " in l]
writes = [l for l in lines if " Write " in l]
if any(" Flush " in l for l in lines):
    sys.exit("FAIL: a FUA write was made durable with a FLUSH although "
             "the remote offers FUA:\n" + "\n".join(lines))
if not writes or any("fua=1" not in l for l in writes):
    sys.exit("FAIL: FUA did not reach nbdkit as FUA:\n" + "\n".join(lines))
if kit.pread(65536, 8 << 20) == plain:
    sys.exit("FAIL: FUA writes wrote back an unrelated dirty range")
h.flush()
if kit.pread(65536, 8 << 20) != plain:
    sys.exit("FAIL: after FLUSH nbdkit does not hold the plain write")

# Nothing written since: a FLUSH has nothing to make durable, and sends no
# NBD_CMD_FLUSH; a write makes the next one send it again.
log_mark = os.path.getsize(log_path)
h.flush()
h.flush()
with open(log_path) as f:
    f.seek(log_mark)
    flushes = [l for l in f.read().splitlines() if " Flush " in l]
if flushes:
    sys.exit("FAIL: FLUSH with nothing written since the last one reached "
             "nbdkit:\n" + "\n".join(flushes))
# One run and nothing else unflushed: it goes as a write with FUA, and no
# NBD_CMD_FLUSH (test-remote-flush-runs-fua.sh).
h.pwrite(b"x" * 4096, 0)
h.flush()
with open(log_path) as f:
    f.seek(log_mark)
    lines = [l for l in f.read().splitlines()
             if " Flush id=" in l or " Write id=" in l]  # not "...Write"
if len(lines) != 1 or "fua=1" not in lines[0]:
    sys.exit("FAIL: after a write, FLUSH should reach nbdkit once, as a "
             "write with FUA:\n" + "\n".join(lines))
h.shutdown()
kit.shutdown()

# A remote without FUA: the write, then NBD_CMD_FLUSH, before the reply.
nofua = nbd.NBD()
nofua.connect_uri(nofua_wbd)
log_mark = os.path.getsize(nofua_log)
buf = os.urandom(4096)
nofua.pwrite(buf, 4096, nbd.CMD_FLAG_FUA)
with open(nofua_log) as f:
    f.seek(log_mark)
    lines = [l for l in f.read().splitlines() if " Write " in l or " Flush " in l]
if len(lines) < 2 or " Write " not in lines[0] or " Flush " not in lines[-1]:
    sys.exit("FAIL: without FUA on the remote, a FUA write should reach it "
             "as a write and then a flush:\n" + "\n".join(lines))
nofua.shutdown()
PY

# The log filter records each request: a Flush (or a write with FUA)
# after the plain Writes, if any (a FLUSH of at most remote.fua_max_runs
# runs writes them with FUA and sends no Flush).
grep -q 'Write ' "$T/kit-requests.log" || fail "nbdkit saw no Write: $(cat "$T/kit-requests.log")"
grep -q -e 'Flush ' -e 'Write .*fua=1' "$T/kit-requests.log" ||
	fail "nbdkit saw no Flush, nor a write with FUA"
last_write=$(grep -n ' Write .*fua=0' "$T/kit-requests.log" | tail -1 | cut -d: -f1 || true)
last_write=${last_write:-0}
last_flush=$(grep -nE ' Flush | Write .*fua=1' "$T/kit-requests.log" | tail -1 | cut -d: -f1)
((last_flush > last_write)) || fail "no FLUSH reached nbdkit after the last write"
