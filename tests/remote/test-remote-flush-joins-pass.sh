#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A FLUSH that arrives while a pass writes back, with nothing written
# since the pass began, joins it: answered with it, no pass of its own
# (link.flushes_joined).  One that arrives after a write the pass could
# not have taken does not, even when that write was begun before the pass
# (its sequence is older) and only landed in the cache during it.
#
# The remote takes 300 ms for every request (bench/net/delay-filter.c);
# FUA is off (remote.fua_max_runs = 0), so a pass is a write and a flush:
# 600 ms.  Write-behind, commits and periodic writeback are off, so only
# the FLUSHes write anything.
#
# Joined: 8 pages written, one FLUSH, and once its pass has writes in
# flight 8 more FLUSHes: all 8 must join, and all 9 find the pages on
# nbdkit when answered.
#
# Not joined: pages X and X+1 hold data on nbdkit and are not in wbd's
# cache.  Client A writes 1 KiB across the two: wbd must read each from
# nbdkit first, one after the other (600 ms), before the write is in the
# cache.  150 ms in, client B writes page Y and FLUSHes: its pass writes
# Y (to 450 ms), finds nothing else dirty, and flushes (to 750 ms).  A's
# write lands and is answered at about 600 ms, during that flush; A's
# FLUSH then asks for nothing newer by sequence than B's, yet must not
# join B's pass, which never wrote X: A must find its bytes on nbdkit
# when its FLUSH is answered.  Joining by sequence alone fails here.
# Counts and contents only: no timings.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl
need_delay_filter

start_nbdkit kit --threads 64 --filter="$T/netdelay.so" memory 64M rtt=300ms
KIT=$KIT_SOCK
add_remote_export disk0 "$(kit_uri "$KIT")"
write_cache_config 64M 'dirty_background_ratio = 50; dirty_ratio = 80; dirty_writeback_centisecs = 0;'
add_remote_settings 'write_behind = false; commit_interval_ms = 0; fua_max_runs = 0;'
start_wbd

joined0=$(link_field flushes_joined)

"$PYTHON" - "$(uri_unix disk0)" "$(kit_uri "$KIT")" "$WBCTL" "$T/control.sock" \
	<<'PY' || fail "see above"
import json, nbd, os, subprocess, sys, threading, time
wbd_uri, kit_uri, wbctl, ctl = sys.argv[1:5]
errors = []

def in_flight():
    out = subprocess.run([wbctl, "-s", ctl, "status", "--json"], check=True,
                         capture_output=True, text=True).stdout
    dev = [d for d in json.loads(out)["devices"] if d["remote"]][0]
    return dev["link"]["writes_in_flight"]

def connect(uri):
    h = nbd.NBD()
    h.connect_uri(uri)
    return h

def wait_all(h, cookies):
    # A cookie found completed is retired: not asked about again.
    left = set(cookies)
    while left:
        left = {c for c in left if not h.aio_command_completed(c)}
        if left:
            h.poll(-1)

kit = connect(kit_uri)

# Joined.
h = connect(wbd_uri)
pages = {}
for i in range(8):
    off = (i * 7 + 1) << 20
    pages[off] = os.urandom(4096)
    h.pwrite(pages[off], off)
first = h.aio_flush()
deadline = time.monotonic() + 30
while in_flight() == 0:
    if h.aio_in_flight() == 0 or time.monotonic() > deadline:
        sys.exit("FAIL: the first FLUSH's pass was never seen with writes "
                 "in flight")
    h.poll(10)
rest = [h.aio_flush() for _ in range(8)]
wait_all(h, [first] + rest)
for off, buf in pages.items():
    if kit.pread(4096, off) != buf:
        errors.append("joined: page at %d not on nbdkit after its FLUSHes"
                      % off)
h.shutdown()

# Not joined.
X, Y = 40 << 20, 44 << 20
kit.pwrite(os.urandom(8192), X)
kit.flush()
a, b = connect(wbd_uri), connect(wbd_uri)
mine = os.urandom(1024)
wa = a.aio_pwrite(mine, X + 4096 - 512)  # lands once X, X+1 are read
time.sleep(0.15)
b.pwrite(os.urandom(4096), Y)
fb = b.aio_flush()
wait_all(a, [wa])
if b.aio_in_flight() == 0:
    errors.append("not joined: B's FLUSH was answered before A's write: "
                  "the test's timing did not hold")
a.flush()
if kit.pread(1024, X + 4096 - 512) != mine:
    errors.append("not joined: A's FLUSH was answered before its write "
                  "reached nbdkit (it joined a pass begun before the "
                  "write was in the cache)")
wait_all(b, [fb])
a.shutdown()
b.shutdown()
kit.shutdown()
if errors:
    sys.exit("FAIL: " + "; ".join(errors))
PY
joined=$(($(link_field flushes_joined) - joined0))
log "wbctl status: $joined FLUSHes joined a pass under way"
((joined >= 8)) || fail "only $joined of 8 FLUSHes joined the pass under way"
assert_alive
