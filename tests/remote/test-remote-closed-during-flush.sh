#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The remote closes the connections that carried wbd's written-back
# writes while a FLUSH is on its way on another one, and answers the
# FLUSH (drop-proxy.py's atflush mode in front of conn-volatile.py: a
# multi-conn disk whose unflushed writes go with the connection that
# made them, as a restarted server's go with it).  The writes were
# answered and sit idle on those connections: nobody uses them, so
# nothing but a look at them after the FLUSH is answered tells wbd they
# are gone.  A FLUSH through wbd that succeeds must find every byte on
# the remote's stable store: wbd writes again what the closed
# connections carried (wb_redo) and flushes once more.  Before, the
# FLUSH was taken as covering them, and succeeded with them lost.  Two
# parts: writes on wbd's write connection, then on libnbd's connections
# alone.  The remote is checked to have dropped written-back blocks, so
# the test can fail.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
start_conn_volatile
start_drop_proxy "$KIT_SOCK"

add_remote_export disk0 "$(kit_uri "$PROXY")"
write_cache_config 64M 'dirty_expire_centisecs = 20; dirty_writeback_centisecs = 10;'
add_remote_settings 'commit_interval_ms = 0; write_behind = false; reconnect_max_ms = 200;'
start_wbd

# flush_closing WHAT: a FLUSH through wbd while the proxy closes every
# other connection; it must succeed, after the remote dropped
# written-back blocks with them.
flush_closing() {
	local mark redo0 before dropped
	mark=$(wc -l <"$T/kit.log")
	redo0=$(remote_field rewritten_after_loss_bytes)
	before=$(grep -c '^atflush' "$T/proxy.log" || true)
	touch "$DROP.atflush"
	flush_until_ok
	(($(grep -c '^atflush' "$T/proxy.log" || true) > before)) ||
		fail "$1: the proxy closed nothing at the FLUSH: $(cat "$T/proxy.log")"
	dropped=$(tail -n +$((mark + 1)) "$T/kit.log" |
		grep -o 'close: conn [0-9]* dropped [0-9]*' |
		awk '{ n += $5 } END { print n + 0 }')
	((dropped >= 256)) ||
		fail "$1: the remote dropped $dropped blocks with the closed connections, not wbd's written-back MiB (the writes went on the FLUSH's connection): $(tail -n 20 "$T/kit.log")"
	log "$1: $(grep '^atflush' "$T/proxy.log" | tail -n 1);" \
		"the remote dropped $dropped blocks; rewritten $(($(remote_field rewritten_after_loss_bytes) - redo0)) bytes"
}

# 1. Written back on wbd's write connection, answered, never flushed.
head -c 4096 /dev/urandom >"$T/first"
write_file_at $((12 * MiB)) "$T/first"
wait_clean 30
wait_remote_field write_connection True || fail "wbctl status: write_connection is not true"
head -c $((4 * MiB)) /dev/urandom >"$T/a"
write_file_at 0 "$T/a"
wait_clean 30
flush_closing "write connection"
on_stable_store "$STORE" "$T/a" 0 "$T/first" $((12 * MiB))
assert_alive

# 2. Written back on libnbd's connections alone, spread over several
# (conn_depth 1), answered, never flushed: the FLUSH goes on one of them
# and the others close.
sed -i 's/commit_interval_ms = 0;/commit_interval_ms = 0; write_connection = false; read_connection = false; conn_depth = 1;/' "$CONF"
grep -q 'conn_depth = 1;' "$CONF" || fail "could not edit $CONF"
reload_remote
head -c 4096 /dev/urandom >"$T/second"
write_file_at $((13 * MiB)) "$T/second"
wait_remote_field write_connection False || fail "write_connection = false left it open"
flush_until_ok
# 4 MiB of pages, every other one of [4 MiB, 12 MiB), which held zeros.
write_half_pages "$(uri_unix disk0)" $((4 * MiB)) 4 7 "$T/data" ||
	fail "writing scattered pages through wbd"
wait_clean 30
conns=$(remote_field connections)
((conns > 1)) || fail "$conns libnbd connection(s) with conn_depth 1: the writes were not spread"
flush_closing "libnbd's $conns connections"
on_stable_store "$STORE" "$T/a" 0 "$T/data" $((4 * MiB)) "$T/first" $((12 * MiB)) "$T/second" $((13 * MiB))
assert_alive
stop_wbd
