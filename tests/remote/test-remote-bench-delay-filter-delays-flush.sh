#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# bench/net/delay-filter.c, the round trip bench/net/run.sh puts between
# its servers and their remote, delays every request, FLUSH included
# (nbdkit's own delay filter does not delay FLUSH): built here as the
# benchmark builds it, in front of nbdkit memory with rtt=5ms, 20 FLUSHes
# one after the other take at least 20 round trips, and so do 20 reads,
# writes, zeroes and trims.  Only lower bounds are checked: the delay can
# make a request slower, never faster, however loaded the machine.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_delay_filter

start_nbdkit kit --threads 64 --filter="$T/netdelay.so" memory 16M rtt=5ms

"$PYTHON" - "$(kit_uri "$KIT_SOCK")" <<'PY' || fail "see above"
import nbd, sys, time

RTT_S, N = 0.005, 20
h = nbd.NBD()
h.connect_uri(sys.argv[1])
ops = {
    "flush": lambda i: h.flush(),
    "pread": lambda i: h.pread(4096, i * 4096),
    "pwrite": lambda i: h.pwrite(b"x" * 4096, i * 4096),
}
if h.can_zero():
    ops["zero"] = lambda i: h.zero(4096, i * 4096)
if h.can_trim():
    ops["trim"] = lambda i: h.trim(4096, i * 4096)
failed = []
for name, op in ops.items():
    t0 = time.monotonic()
    for i in range(N):
        op(i)
    took = time.monotonic() - t0
    print("%d × %s at rtt=5ms: %.3f s" % (N, name, took))
    if took < N * RTT_S:
        failed.append("%d %s requests took %.3f s, less than %d round trips"
                      % (N, name, took, N))
h.shutdown()
if failed:
    sys.exit("FAIL: " + "; ".join(failed))
PY
