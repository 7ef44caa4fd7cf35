#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Write-behind (remote.write_behind): dirty data on an idle remote is
# written back at once, with no FLUSH, long before dirty_expire_centisecs
# (30 s) or dirty_background_ratio (50 %); while it writes, a client's
# FLUSH completes and reads are served (it yields to them), and nbdkit
# then holds everything.  With write_behind = false the data stays dirty
# (today's behaviour, the kernel's thresholds).
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl

start_nbdkit slow --filter=delay memory 64M delay-write=50ms
SLOW=$KIT_SOCK
add_remote_export slow "$(kit_uri "$SLOW")"
write_cache_config 256M 'dirty_background_ratio = 50; dirty_ratio = 60; dirty_expire_centisecs = 3000;'
start_wbd

dirty() {
	remote_wbctl status --json | "$PYTHON" -c 'import json, sys
print(json.load(sys.stdin)["cache"]["dirty_bytes"])'
}
behind() {
	remote_wbctl status --json | "$PYTHON" -c 'import json, sys
d = [d for d in json.load(sys.stdin)["devices"] if d["remote"]][0]
print(d["link"]["write_behind_bytes"])'
}

# 1. No FLUSH: the dirty data goes on its own, well before it expires.
write_half_pages "$(uri_unix slow)" 0 2 1 "$T/img-1" || fail "the writes failed"
wait_clean 20
b=$(behind)
((b >= 2 << 20)) || fail "write-behind wrote $b bytes, not the 2 MiB written"
log "write-behind wrote $b bytes with no FLUSH"

# 2. Yielding: while write-behind writes 4 MiB more, a FLUSH completes
# and reads of the first part are served (and read what was written).
write_half_pages "$(uri_unix slow)" $((16 << 20)) 4 2 "$T/img-2" || fail "the writes failed"
(($(dirty) > 0)) || log "write-behind had already written everything (a fast machine)"
"$PYTHON" - "$(uri_unix slow)" "$T/img-1" <<'PY' || fail "reads or the FLUSH during write-behind failed"
import nbd, sys
uri, img = sys.argv[1:3]
want = open(img, "rb").read()
h = nbd.NBD()
h.connect_uri(uri)
assert h.pread(len(want), 0) == want, "a read during write-behind"
h.flush()
h.shutdown()
PY
(($(dirty) == 0)) || fail "dirty data left after the FLUSH, with no writer"
remote_read "$SLOW" 0 $((4 << 20)) "$T/remote-1"
cmp "$T/img-1" "$T/remote-1" || fail "nbdkit does not hold the first writes"
remote_read "$SLOW" $((16 << 20)) $((8 << 20)) "$T/remote-2"
cmp "$T/img-2" "$T/remote-2" || fail "nbdkit does not hold the writes the FLUSH covered"

# 3. write_behind = false: the data waits for the thresholds (a lower
# bound only: it is still dirty 2 s later, the expiry being 30 s).
echo 'remote = { write_behind = false; };' >>"$CONF"
reload_remote
write_half_pages "$(uri_unix slow)" $((32 << 20)) 1 3 "$T/img-3" || fail "the writes failed"
sleep 2
(($(dirty) > 0)) || fail "with write_behind = false, the dirty data went without a FLUSH"
