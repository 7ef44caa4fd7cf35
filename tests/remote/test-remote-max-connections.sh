#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# remote.max_connections: every connection one export opens to its remote
# (libnbd's and wbd's own read and write connections) stays within it.
# A multi-conn remote that serves one request of a connection at a time
# (nbdkit --threads 1, writes delayed) with conn_depth = 1 would get a
# connection for every write in flight.  With max_connections = 3, 16
# MiB written back by `wbctl flush` keep at most 3 open, counted by wbd
# (wbctl status: all_connections) and by the kernel (ss: the remote's
# socket); status shows the bound and the connections it held back, and
# the log says so.  A reload to the default (13) lets more open; a
# reload back to 2 closes those over it as they go idle.  nbdkit holds
# every byte after each FLUSH.  max_connections = 0 or 14 is refused
# with the file and line.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl
command -v ss >/dev/null || skip "ss (iproute2) is not installed"

start_nbdkit serial --threads 1 --filter=delay memory 64M delay-write=20ms
SERIAL=$KIT_SOCK
add_remote_export serial "$(kit_uri "$SERIAL")"
write_cache_config 256M 'dirty_background_ratio = 50; dirty_ratio = 60; dirty_writeback_centisecs = 0;'
add_remote_settings 'write_behind = false; commit_interval_ms = 0; conn_depth = 1; max_connections = 3;'
start_wbd

# kit_conns: connections the kernel has open to the remote's socket
# (its accepted ends, named by the socket's path).
kit_conns() {
	ss -xH state connected src "$SERIAL" 2>/dev/null | wc -l
}

# write_then_flush OFFSET: 16 MiB of random data at OFFSET (kept in
# $T/data), then `wbctl flush`, sampling the connections while it runs:
# sets MOST (wbd's count) and KMOST (the kernel's), the most seen.
: >"$T/data"
sample_conns() {
	local c
	c=$(remote_field all_connections)
	((c <= MOST)) || MOST=$c
	c=$(kit_conns)
	((c <= KMOST)) || KMOST=$c
}
write_then_flush() {
	MOST=0 KMOST=0
	flush_sampling "$(uri_unix serial)" "$1" "$T/data" sample_conns
}

# reload_with KEYS: the remote group's max_connections set anew, applied.
reload_with() {
	local n i
	sed -i "s/max_connections = [0-9]*;/$1/" "$CONF"
	grep -q "$1" "$CONF" || fail "could not edit $CONF"
	n=$(grep -c 'reload: .*remote settings applied' "$LOG" || true)
	kill -HUP "$WBD_PID"
	for ((i = 0; i < 50; i++)); do
		(($(grep -c 'reload: .*remote settings applied' "$LOG" || true) > n)) && return 0
		sleep 0.1
	done
	fail "the reload did not apply the remote settings"
}

[[ $(remote_field multi_conn) == True ]] || fail "nbdkit's memory plugin does not offer multi-conn here"
max=$(remote_field max_connections)
((max == 3)) || fail "wbctl status shows max_connections $max, not 3"
write_then_flush 0
held=$(remote_field connections_held_back)
log "max_connections 3: at most $MOST open (wbd), $KMOST (kernel); $held held back"
((MOST <= 3)) || fail "wbd counted $MOST connections open with max_connections = 3"
((KMOST <= 3)) || fail "the remote's socket had $KMOST connections with max_connections = 3"
((held > 0)) || fail "conn_depth 1 and writes in flight, yet no connection was held back"
grep -q 'remote.max_connections 3: no .* connection opened' "$LOG" ||
	fail "the log does not say that max_connections held a connection back"
remote_wbctl status | grep -q 'at most 3 (max_connections)' ||
	fail "wbctl status does not show max_connections: $(remote_wbctl status | grep -A2 'nbd ')"

reload_with 'max_connections = 13;'
write_then_flush $((16 << 20))
log "max_connections 13: at most $MOST open (wbd), $KMOST (kernel)"
((MOST > 3)) || fail "with max_connections 13 and conn_depth 1, only $MOST connections opened: the test shows nothing"

reload_with 'max_connections = 2;'
write_then_flush $((32 << 20))
# Those over the bound close as they go idle: one more write and read
# touches each kind of connection.
"$PYTHON" - "$(uri_unix serial)" <<'PY' || fail "I/O after the reload failed"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pread(1 << 20, 60 << 20)
h.shutdown()
PY
for ((i = 0; i < 50; i++)); do
	(($(remote_field all_connections) <= 2 && $(kit_conns) <= 2)) && break
	sleep 0.1
done
n=$(remote_field all_connections)
((n <= 2)) || fail "max_connections lowered to 2, yet $n connections stay open (wbd)"
n=$(kit_conns)
((n <= 2)) || fail "max_connections lowered to 2, yet the remote's socket has $n connections"
log "max_connections 2 after a reload: $(remote_field all_connections) open"

remote_read "$SERIAL" 0 $((48 << 20)) "$T/remote"
cmp "$T/data" "$T/remote" || fail "nbdkit does not hold what was flushed"

# Out of range: refused with the file and line.
for bad in 0 14; do
	sed "s/max_connections = [0-9]*;/max_connections = $bad;/" "$CONF" >"$T/bad.conf"
	if "$WBD" -n -c "$T/bad.conf" >"$T/bad.out" 2>&1; then
		fail "wbd -n took max_connections = $bad"
	fi
	grep -q "bad.conf:[0-9]*.*max_connections" "$T/bad.out" ||
		fail "max_connections = $bad refused without file, line and name: $(cat "$T/bad.out")"
done
log "max_connections 0 and 14 refused: $(head -n 1 "$T/bad.out")"
