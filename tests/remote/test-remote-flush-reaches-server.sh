#!/usr/bin/env bash
# Writes through wbd stay in its cache (periodic writeback off) until a
# FLUSH; after the FLUSH, nbdkit itself holds them.  A FUA write is on
# nbdkit when its reply arrives.  nbdkit's log filter shows the FLUSH
# reaching it after the writes.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd

start_nbdkit kit --filter=log memory 32M logfile="$T/kit-requests.log"
add_remote_export disk0 "$(kit_uri "$KIT_SOCK")"
write_cache_config 64M 'dirty_background_ratio = 80; dirty_ratio = 90; dirty_writeback_centisecs = 0;'
start_wbd

"$PYTHON" - "$(uri_unix disk0)" "$(kit_uri "$KIT_SOCK")" <<'PY' || fail "see above"
import nbd, os, sys
wbd_uri, kit_uri = sys.argv[1:3]

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

for off, n in [(0, 4096), (12345, 777), ((20 << 20) + 1, 70000)]:
    buf = os.urandom(n)
    h.pwrite(buf, off, nbd.CMD_FLAG_FUA)
    if kit.pread(n, off) != buf:
        sys.exit("FAIL: FUA write [%d, +%d) not on nbdkit at its reply"
                 % (off, n))
h.shutdown()
kit.shutdown()
PY

# The log filter records each request: a Flush after the Writes.
grep -q 'Write ' "$T/kit-requests.log" || fail "nbdkit saw no Write: $(cat "$T/kit-requests.log")"
grep -q 'Flush ' "$T/kit-requests.log" || fail "nbdkit saw no Flush"
last_write=$(grep -n 'Write ' "$T/kit-requests.log" | tail -1 | cut -d: -f1)
last_flush=$(grep -n 'Flush ' "$T/kit-requests.log" | tail -1 | cut -d: -f1)
((last_flush > last_write)) || fail "no FLUSH reached nbdkit after the last write"
