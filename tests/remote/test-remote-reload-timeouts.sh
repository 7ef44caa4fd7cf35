#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A reload applies the remote group's timeouts to backends already open:
# with the remote gone, a read that misses the cache waits io_timeout_ms
# for a reconnection; after a reload lowers it from 60 s to 1 s, such a
# read fails with EIO within seconds.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd

start_nbdkit kit memory 16M
KIT=$KIT_PID
add_remote_export r "$(kit_uri "$KIT_SOCK")"
write_config
add_remote_settings 'io_timeout_ms = 60000; reconnect_max_ms = 200;'
start_wbd

"$PYTHON" - "$(uri_unix r)" <<'PY' || fail "reading through wbd failed"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pread(4096, 0)
h.shutdown()
PY
stop_kit "$KIT" KILL

sed -i 's/io_timeout_ms = 60000;/io_timeout_ms = 1000;/' "$CONF"
grep -q 'io_timeout_ms = 1000;' "$CONF" || fail "could not edit $CONF"
reload_remote

"$PYTHON" - "$(uri_unix r)" <<'PY' || fail "see above"
import nbd, sys, time
h = nbd.NBD()
h.connect_uri(sys.argv[1])
t0 = time.monotonic()
try:
    h.pread(4096, 8 << 20)          # a miss: needs the remote
    sys.exit("FAIL: a read needing the stopped remote succeeded")
except nbd.Error as e:
    took = time.monotonic() - t0
    if e.errnum != 5:               # EIO
        sys.exit("FAIL: expected EIO, got %s" % e)
if took > 15:
    sys.exit("FAIL: the read failed after %.1f s: the reloaded 1 s "
             "io_timeout_ms was not applied (the old one was 60 s)" % took)
print("read failed with EIO after %.1f s" % took)
h.shutdown()
PY
