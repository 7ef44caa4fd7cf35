#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# remote.conn_depth: on a multi-conn remote that serves one request of a
# connection at a time (nbdkit --threads 1, behind its delay filter so
# that writes stay in flight), writeback of 16 MiB by `wbctl flush` keeps
# several writes in flight on one connection with the default (16), and
# spreads them over several connections once a reload sets conn_depth = 1.
# wbctl status shows the setting and the connections, sampled while the
# flush runs; nbdkit then holds the data.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl

start_nbdkit serial --threads 1 --filter=delay memory 64M delay-write=50ms
SERIAL=$KIT_SOCK
add_remote_export serial "$(kit_uri "$SERIAL")"
write_cache_config 256M 'dirty_background_ratio = 50; dirty_ratio = 60; dirty_writeback_centisecs = 0;'
# The FLUSH does the work; 8 writes of 1 MiB in flight at most (the
# window's bound), so that the default never needs a second connection.
add_remote_settings 'write_behind = false; commit_interval_ms = 0; max_writeback_inflight_bytes = "8M";'
start_wbd


# write_then_flush OFFSET: 16 MiB of random data written at OFFSET (kept
# in $T/data, whole), then `wbctl flush`, with the remote's connections
# sampled while it runs: sets CONNS, the most seen.
: >"$T/data"
sample_conns() {
	local c
	c=$(remote_field connections)
	((c <= CONNS)) || CONNS=$c
}
write_then_flush() {
	CONNS=0
	flush_sampling "$(uri_unix serial)" "$1" "$T/data" sample_conns
}

[[ $(remote_field multi_conn) == True ]] || fail "nbdkit's memory plugin does not offer multi-conn here"
depth=$(remote_field conn_depth)
((depth == 16)) || fail "wbctl status shows conn_depth $depth, not the default 16"
write_then_flush 0
most=$(link_field writes_in_flight_max)
log "conn_depth 16: at most $most writes in flight, $CONNS connection(s)"
((most > 1)) || fail "at most $most write in flight: nothing to spread"
((CONNS == 1)) || fail "with conn_depth 16 and at most $most writes in flight, the writes went over $CONNS connections"

sed -i 's/write_behind = false;/write_behind = false; conn_depth = 1;/' "$CONF"
grep -q 'conn_depth = 1;' "$CONF" || fail "could not edit $CONF"
reload_remote
depth=$(remote_field conn_depth)
((depth == 1)) || fail "wbctl status shows conn_depth $depth after the reload set 1"
write_then_flush $((16 << 20))
log "conn_depth 1: $CONNS connection(s)"
((CONNS > 1)) || fail "with conn_depth 1 the writes stayed on $CONNS connection"

remote_read "$SERIAL" 0 $((32 << 20)) "$T/remote"
cmp "$T/data" "$T/remote" || fail "nbdkit does not hold what was flushed"
