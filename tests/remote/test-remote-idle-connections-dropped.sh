#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The remote closes every connection while wbd has nothing in flight on
# them (drop-proxy.py between wbd and nbdkit; a server's idle timeout,
# or a NAT or firewall between, does the same): wbd finds out on its
# next use of each connection, connects again, and loses nothing.
# Scattered pages are written and FLUSHed; with the device idle (nothing
# dirty, nothing in flight) every connection is dropped; the same pages
# written anew and FLUSHed: the FLUSH succeeds, nbdkit holds the new
# data, and a read of the whole disk through wbd returns it (the pages
# never written are misses: they go to the remote on a connection made
# again too); status counts the reconnection and the writes that met the
# lost connection (writes_on_lost_connections), and a write a while
# later opens writeback's own connection again.  Before, such a write
# counted as a writeback error and the client's FLUSH failed with EIO,
# the remote up all along.  Then a second drop, new data left dirty, and
# SIGTERM: the drain writes it over new connections and nbdkit holds it.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
wbd_behind_drop_proxy 'write_behind = false;'

write_scattered_pages "$(uri_unix disk0)" "$T/first" 5 512 64 2 flush ||
	fail "the first writes or their FLUSH failed"
drop
reconnects=$(remote_field reconnects)
write_scattered_pages "$(uri_unix disk0)" "$T/data" 5 512 64 2 flush ||
	fail "the writes or the FLUSH after the drop failed"
cmp -s "$T/first" "$T/data" && fail "the second writes repeat the first's data"
remote_read "$KIT" 0 $((64 << 20)) "$T/remote"
cmp "$T/data" "$T/remote" || fail "nbdkit does not hold what the FLUSH after the drop covered"
"$PYTHON" - "$(uri_unix disk0)" "$T/data" <<'PY' || fail "a read through wbd after the drop does not return the data"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
want = open(sys.argv[2], "rb").read()
for off in range(0, len(want), 4 << 20):
    assert h.pread(4 << 20, off) == want[off:off + (4 << 20)], "wrong data at %d" % off
h.shutdown()
PY
log "after the drop: remote.reconnects $reconnects -> $(remote_field reconnects)," \
	"write_connection $(remote_field write_connection), read_connection $(remote_field read_connection)"
[[ $(remote_field connected) == True ]] || fail "status does not show the remote connected"
(($(remote_field reconnects) > reconnects)) || fail "status counts no reconnection after the drop"
lost=$(remote_field writes_on_lost_connections)
log "writes that met a lost connection: $lost"
((lost > 0)) || fail "no write met a lost connection: the drop did not reach writeback"

# wbd's own connections (reads', writes') are opened again by the first
# use after their back-off (1 s).
sleep 1.5
write_scattered_pages "$(uri_unix disk0)" "$T/data" 5 512 64 2 flush ||
	fail "the writes or the FLUSH a while after the drop failed"
wait_remote_field write_connection True ||
	fail "writeback's own connection was not opened again after the drop"

drop
write_scattered_pages "$(uri_unix disk0)" "$T/last" 5 512 64 2 ||
	fail "the writes after the second drop failed"
stop_wbd "$WBD_PID" TERM 60
remote_read "$KIT" 0 $((64 << 20)) "$T/remote"
cmp "$T/last" "$T/remote" || fail "nbdkit does not hold what the drain at SIGTERM wrote"
