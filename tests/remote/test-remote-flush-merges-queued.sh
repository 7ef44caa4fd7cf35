#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Client FLUSHes queued together are written back by one pass, and no
# FLUSH is answered by a pass that began before it arrived.  The remote
# takes 200 ms for every request (bench/net/delay-filter.c), write-behind
# and commits off, so the FLUSHes write every page.
#
# Together: 16 clients, each on its own connection, write a page and
# FLUSH at the same moment, 3 rounds.  At most WB_FLUSH_PASSES (2) passes
# run at once and each takes every FLUSH queued when it begins: two may
# begin with one FLUSH each, and the third takes the 14 others, all
# queued long before the first ends (a round trip is 200 ms), so at
# least 13 of each round's 16 are merged into another's pass, 39 of 48
# (link.flushes_merged); 36 are asked.  With a pass for every FLUSH, as
# many as the device has workers run at once and 28 were merged.
#
# Staggered: a FLUSH starts a pass, then 6 more clients each write a page
# and FLUSH 40 ms apart, while passes are in flight.  Each FLUSH, in both
# parts, must find its own page on nbdkit (read there directly) as soon
# as it is answered: a FLUSH answered by a pass that began before its
# write would not.  Counts and contents only: no timings.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl
need_delay_filter

start_nbdkit kit --threads 64 --filter="$T/netdelay.so" memory 64M rtt=200ms
KIT=$KIT_SOCK
add_remote_export disk0 "$(kit_uri "$KIT")"
write_cache_config 64M 'dirty_background_ratio = 50; dirty_ratio = 80; dirty_writeback_centisecs = 0;'
add_remote_settings 'write_behind = false; commit_interval_ms = 0;'
start_wbd

before=$(link_field flushes_merged)

"$PYTHON" - "$(uri_unix disk0)" "$(kit_uri "$KIT")" <<'PY' || fail "see above"
import nbd, os, sys, threading, time
wbd_uri, kit_uri = sys.argv[1:3]
errors = []

def write_flush_check(h, kit, off, who):
    buf = os.urandom(4096)
    h.pwrite(buf, off)
    h.flush()
    if kit.pread(4096, off) != buf:
        errors.append("%s: FLUSH answered before its write reached the "
                      "remote" % who)

def in_threads(fn, n):
    """fn(0) ... fn(n - 1), each on a thread of its own, all at once."""
    threads = [threading.Thread(target=fn, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

# Together.
CLIENTS, ROUNDS = 16, 3
barrier = threading.Barrier(CLIENTS)

def client(name, body):
    """BODY(h, kit) on a connection to wbd and one to nbdkit."""
    try:
        h = nbd.NBD()
        h.connect_uri(wbd_uri)
        kit = nbd.NBD()
        kit.connect_uri(kit_uri)
        body(h, kit)
        h.shutdown()
        kit.shutdown()
    except Exception as e:  # reported below
        errors.append("%s: %r" % (name, e))
        return False
    return True

def together(i):
    def rounds(h, kit):
        for r in range(ROUNDS):
            barrier.wait(timeout=60)
            write_flush_check(h, kit, (r * CLIENTS + i) << 20,
                              "client %d round %d" % (i, r))
    if not client("client %d" % i, rounds):
        barrier.abort()

in_threads(together, CLIENTS)

# Staggered: each one arrives while the passes before it are in flight.
def staggered(i):
    def one(h, kit):
        time.sleep(0.04 * i)
        write_flush_check(h, kit, (48 + i) << 20, "staggered client %d" % i)
    client("staggered client %d" % i, one)

in_threads(staggered, 7)
if errors:
    sys.exit("FAIL: " + "; ".join(errors))
PY
got=$(($(link_field flushes_merged) - before))
log "wbctl status: $got of the FLUSHes merged into another's pass"
((got >= 36)) || fail "only $got of 48 FLUSHes queued together were merged into another's pass"
assert_alive
