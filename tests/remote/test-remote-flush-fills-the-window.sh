#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A FLUSH over a slow multi-conn remote (nbdkit's delay filter, 100 ms per
# write) keeps more than the old 16 writes in flight: the window grows
# with the link's estimate (bandwidth x round trip) and the writes go over
# several connections.  Write-behind is off, so the FLUSH does the work.
# wbctl status shows the round trip, the window and the most writes in
# flight; nbdkit then holds the data.  No upper bound on time.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl

start_nbdkit slow --filter=delay memory 64M delay-write=100ms
SLOW=$KIT_SOCK
add_remote_export slow "$(kit_uri "$SLOW")"
write_cache_config 256M 'dirty_background_ratio = 50; dirty_ratio = 60; dirty_writeback_centisecs = 0;'
add_remote_settings 'write_behind = false;'
start_wbd

# 8 MiB of scattered 4K pages (no two touch: 2048 runs), then a FLUSH.
write_scattered_pages "$(uri_unix slow)" "$T/data" 27 2048 64 2 flush ||
	fail "writing or the FLUSH failed"

rtt=$(link_field round_trip_us) window=$(link_field window_writes) most=$(link_field writes_in_flight_max)
conns=$(remote_field connections)
log "round trip ${rtt} us, window $window writes, at most $most in flight, $conns connection(s)"
((rtt >= 100000)) || fail "the round trip is ${rtt} us, under nbdkit's 100 ms delay"
((window > 16)) || fail "the window stayed at $window writes"
((most > 16)) || fail "at most $most writes were in flight: the window did not grow past 16"
((conns > 1)) || fail "the writes went over $conns connection(s) of a multi-conn remote"
(($(link_field writes_in_flight) == 0)) || fail "writes still in flight after the FLUSH"

remote_read "$SLOW" 0 $((64 << 20)) "$T/remote"
cmp "$T/data" "$T/remote" || fail "nbdkit does not hold what the FLUSH covered"
