#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A remote host loses power and comes back: the server forgets what it
# had not flushed, and wbd hears nothing on its old connections, which
# still look open (drop-proxy.py's freeze: each connection's server end
# closed, so conn-volatile.py drops its unflushed writes, and its client
# end left open and silent).  wbd's written-back writes, answered on its
# write connection and not flushed, are gone.  A cache miss then waits on
# each of libnbd's old connections (conn_depth 1, so a FLUSH would open a
# new one), and a FLUSH comes.  It must not succeed with the writes lost: sent
# on the connection open longest (an old one), it gets no answer, the
# connection is given up at io_timeout_ms, counted lost, and the writes
# go again on new connections before the FLUSH that succeeds.  Before,
# the FLUSH went on a new connection, reached the server that came back,
# and succeeded with 1,024 of 1,024 blocks missing from its stable store.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
start_conn_volatile
start_drop_proxy "$KIT_SOCK"

add_remote_export disk0 "$(kit_uri "$PROXY")"
write_cache_config 64M 'dirty_expire_centisecs = 20; dirty_writeback_centisecs = 10;'
add_remote_settings 'commit_interval_ms = 0; write_behind = false; read_connection = false; conn_depth = 1; io_timeout_ms = 4000; reconnect_max_ms = 200;'
start_wbd

# 1. Written back on the write connection, answered, not flushed.
head -c 4096 /dev/urandom >"$T/first"
write_file_at $((12 * MiB)) "$T/first"
flush_until_ok
wait_remote_field write_connection True || fail "wbctl status: write_connection is not true"
head -c $((4 * MiB)) /dev/urandom >"$T/a"
write_file_at 0 "$T/a"
wait_clean 30
conns=$(remote_field connections)

# 2. The power cut: the server drops what it had not flushed, and every
# connection goes silent.
mark=$(wc -l <"$T/kit.log")
touch "$DROP.freeze"
for ((i = 0; i < 100; i++)); do
	grep -q '^froze' "$T/proxy.log" && break
	sleep 0.1
done
grep -q '^froze [1-9]' "$T/proxy.log" || fail "the proxy froze nothing: $(cat "$T/proxy.log")"
dropped=0
for ((i = 0; i < 100 && dropped < 1024; i++)); do
	dropped=$(tail -n +$((mark + 1)) "$T/kit.log" |
		grep -o 'close: conn [0-9]* dropped [0-9]*' |
		awk '{ n += $5 } END { print n + 0 }')
	sleep 0.1
done
((dropped >= 1024)) ||
	fail "the remote dropped $dropped blocks, not the 4 MiB written back: $(tail -n 5 "$T/kit.log")"
log "$(grep '^froze' "$T/proxy.log"); libnbd had $conns connection(s); the remote dropped $dropped blocks"

# 3. A miss waits on each of libnbd's old connections (they fail at
# io_timeout_ms): one more connection would be opened for a FLUSH.
"$PYTHON" - "$(uri_unix disk0)" "$conns" >"$T/read.out" 2>&1 <<'PY' &
import nbd, sys, threading
failed = []
def read(i):
    h = nbd.NBD()
    h.connect_uri(sys.argv[1])
    try:
        h.pread(4096, (8 << 20) + i * (256 << 10))
    except nbd.Error as e:
        failed.append(str(e))
ts = [threading.Thread(target=read, args=(i,)) for i in range(int(sys.argv[2]))]
for t in ts:
    t.start()
for t in ts:
    t.join()
print("%d read(s), %d failed" % (len(ts), len(failed)))
PY
reader=$!
sleep 0.5

# 4. The FLUSH succeeds only with every byte on the stable store.
t0=$(date +%s%N)
flush_until_ok
ms=$((($(date +%s%N) - t0) / 1000000))
on_stable_store "$STORE" "$T/a" 0 "$T/first" $((12 * MiB))
wait "$reader" || true
redo=$(remote_field rewritten_after_loss_bytes)
((redo >= 4 * MiB)) || fail "rewritten_after_loss_bytes is $redo, expected at least 4 MiB"
log "the FLUSH succeeded after $ms ms with every byte on the stable store;" \
	"rewritten $redo bytes; $(cat "$T/read.out")"
assert_alive
stop_wbd
