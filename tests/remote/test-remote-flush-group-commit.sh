#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# FLUSHes arriving together share one remote flush (group commit): 8
# clients, each on its own connection, write a page and FLUSH at the same
# moment, 5 rounds, over a remote that takes 100 ms for every request,
# FLUSH included (bench/net/delay-filter.c).  nbdkit's log filter counts
# the NBD_CMD_FLUSHes that reach the remote: at most half the 40 FLUSHes
# the clients sent (each FLUSH that arrives while a remote flush is in
# flight waits for it, or for the next one, and shares it; before, each
# sent its own: 40).  Every FLUSH still succeeds only once its own write
# is on the remote, which the clients check on nbdkit directly at once.
# Counts only: no timings.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl
need_delay_filter

KLOG=$T/kit-requests.log
# The log filter nearest the client: it sees each request as it arrives.
start_nbdkit kit --threads 64 --filter=log --filter="$T/netdelay.so" \
	memory 64M rtt=100ms logfile="$KLOG"
KIT=$KIT_SOCK
add_remote_export disk0 "$(kit_uri "$KIT")"
write_cache_config 64M 'dirty_background_ratio = 50; dirty_ratio = 80; dirty_writeback_centisecs = 0;'
# The FLUSHes write the pages: no write-behind, no commits of its own.
# A FLUSH's page goes plainly, and a flush after it (fua_max_runs = 0:
# the runs with FUA that need no flush are test-remote-flush-runs-fua).
add_remote_settings 'write_behind = false; commit_interval_ms = 0; fua_max_runs = 0;'
start_wbd

"$PYTHON" - "$(uri_unix disk0)" "$(kit_uri "$KIT")" "$KLOG" <<'PY' || fail "see above"
import nbd, os, re, sys, threading
wbd_uri, kit_uri, klog = sys.argv[1:4]
CLIENTS, ROUNDS = 8, 5

def remote_flushes():
    with open(klog) as f:
        return len(re.findall(r"connection=\d+ Flush id=", f.read()))

before = remote_flushes()
barrier = threading.Barrier(CLIENTS)
errors = []

def client(i):
    try:
        h = nbd.NBD()
        h.connect_uri(wbd_uri)
        kit = nbd.NBD()
        kit.connect_uri(kit_uri)
        for r in range(ROUNDS):
            off = (r * CLIENTS + i) * (1 << 20)  # never touching another
            buf = os.urandom(4096)
            h.pwrite(buf, off)
            barrier.wait(timeout=60)
            h.flush()
            if kit.pread(4096, off) != buf:
                errors.append("client %d round %d: FLUSH returned before "
                              "its write reached the remote" % (i, r))
        h.shutdown()
        kit.shutdown()
    except Exception as e:  # reported below
        errors.append("client %d: %r" % (i, e))
        barrier.abort()

threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
if errors:
    sys.exit("FAIL: " + "; ".join(errors))
sent = CLIENTS * ROUNDS
got = remote_flushes() - before
print("%d FLUSHes from the clients, %d NBD_CMD_FLUSH at the remote" % (sent, got))
if got < ROUNDS:
    sys.exit("FAIL: %d remote flushes for %d rounds of writes" % (got, ROUNDS))
if got > sent // 2:
    sys.exit("FAIL: %d FLUSHes arriving together cost the remote %d "
             "flushes: they did not share them" % (sent, got))
open(klog + ".count", "w").write("%d\n" % got)
PY
# wbctl status counts them the same way: the flushes sent, and the
# FLUSHes that shared another's flush, or joined a pass under way, and
# so its flush (the clients' writes all come before their FLUSHes: the
# FLUSHes after the first in a round may find nothing new since its pass
# began, test-remote-flush-joins-pass).
sent=$(link_field flushes_sent) shared=$(link_field flushes_shared)
joined=$(link_field flushes_joined)
log "wbctl status: $sent flushes sent, $shared shared, $joined FLUSHes joined a pass"
((sent == $(cat "$KLOG.count"))) || fail "wbctl status counts $sent flushes sent, the remote got $(cat "$KLOG.count")"
((shared + joined > 0)) || fail "wbctl status counts no FLUSH that shared a flush"
assert_alive
