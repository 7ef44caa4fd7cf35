#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# remote.min_writeback_inflight is the least of writeback's window on a
# remote: before any write has come back (nbdkit's delay filter holds
# each for 2 s), `wbctl flush` keeps exactly that many in flight (100),
# not the 64 a sync's writes got before it (or the 16 of background
# work), nor more; `wbctl status` shows it (link.min_inflight_writes), a
# reload changes it, and nbdkit then holds every byte.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl

start_nbdkit slow --filter=delay memory 64M delay-write=2000ms
SLOW=$KIT_SOCK
add_remote_export slow "$(kit_uri "$SLOW")"
write_cache_config 256M 'dirty_background_ratio = 50; dirty_ratio = 60; dirty_writeback_centisecs = 0;'
add_remote_settings 'min_writeback_inflight = 100; write_behind = false; commit_interval_ms = 0;'
start_wbd

(($(link_field min_inflight_writes) == 100)) ||
    fail "status shows min_inflight_writes $(link_field min_inflight_writes), not 100"

# 160 scattered 4K pages (no two touch), at memory speed, left dirty
# (write-behind off, no periodic writeback, far under the background
# threshold).
write_scattered_pages "$(uri_unix slow)" "$T/data" 40 160 64 2 || fail "writing failed"

(($(remote_wbctl status --json | "$PYTHON" -c 'import json, sys
print(json.load(sys.stdin)["cache"]["dirty_bytes"])') == 160 * 4096)) ||
    fail "the 160 pages are not all dirty before the flush"

# Within the first round trip (2 s) nothing has come back: the window is
# its floor, and full.
remote_wbctl flush >"$T/flush.out" 2>&1 &
FLUSH_PID=$!
sleep 0.5
inflight=$(link_field writes_in_flight) window=$(link_field window_writes)
log "before the first reply: $inflight writes in flight, window $window"
((window == 100)) || fail "the window is $window writes before any reply, not min_writeback_inflight's 100"
((inflight == 100)) || fail "$inflight writes in flight before any reply, not min_writeback_inflight's 100"
wait "$FLUSH_PID" || fail "wbctl flush failed: $(cat "$T/flush.out")"

sed -i 's/min_writeback_inflight = 100;/min_writeback_inflight = 8;/' "$CONF"
reload_remote
(($(link_field min_inflight_writes) == 8)) ||
    fail "after the reload status shows min_inflight_writes $(link_field min_inflight_writes), not 8"

wait_clean 60
"$PYTHON" - "$(uri_unix slow)" <<'PY' || fail "the FLUSH failed"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.flush()
h.shutdown()
PY
remote_read "$SLOW" 0 $((64 << 20)) "$T/remote"
cmp "$T/data" "$T/remote" || fail "nbdkit does not hold what was written"
assert_alive
