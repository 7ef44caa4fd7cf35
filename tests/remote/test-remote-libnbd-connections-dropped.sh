#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The remote closes every connection while they are idle, with every
# write going through libnbd (write_connection and read_connection off)
# over 8 connections (conn_depth 1, a multi-conn remote): the first
# write after the drop finds its connection dead, and every connection
# is retired with it.  Three rounds of 512 scattered pages and a FLUSH,
# a drop between: each FLUSH succeeds, nbdkit holds the data, and no
# writeback error is counted.  Before, the writes that began after the
# loss found no free slot while the retired connections were in use,
# failed with ENOTCONN as if the remote were away, and the FLUSH failed
# with EIO (55 errors a round); and the retired connections nobody was
# using were never closed, so the remote got 1 connection back, not 8,
# and wbd kept their sockets: the connections open after the third
# round must come back to more than one.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
wbd_behind_drop_proxy 'write_behind = false; write_connection = false; read_connection = false; conn_depth = 1;'

for round in 1 2 3; do
	write_scattered_pages "$(uri_unix disk0)" "$T/data" 5 512 64 2 flush ||
		fail "round $round: the writes or the FLUSH failed (after $((round - 1)) drop(s))"
	remote_read "$KIT" 0 $((64 << 20)) "$T/remote"
	cmp "$T/data" "$T/remote" || fail "round $round: nbdkit does not hold what the FLUSH covered"
	errors=$(remote_wbctl status --json | "$PYTHON" -c 'import json, sys
print(sum(d["errors"] for d in json.load(sys.stdin)["devices"]))')
	conns=$(remote_field connections)
	log "round $round: FLUSH ok, $conns connection(s), errors $errors," \
		"reconnects $(remote_field reconnects), writes on lost connections $(remote_field writes_on_lost_connections)"
	((errors == 0)) || fail "round $round: $errors writeback error(s) with the remote up all along"
	((round == 1)) || (($(remote_field writes_on_lost_connections) > 0)) ||
		fail "round $round: no write met the lost connections: the drop did not reach writeback"
	((round == 1)) || ((conns > 1)) ||
		fail "round $round: $conns connection after the drop: the retired ones were never closed"
	drop
done
