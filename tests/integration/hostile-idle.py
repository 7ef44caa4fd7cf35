#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""hostile-idle.py - a local user holding idle NBD connections.

Used by test-idle-clients-do-not-lock-listener.sh, run as another user
than the test.  Opens N connections to 127.0.0.1:PORT, finishes each
handshake (NBD_OPT_EXPORT_NAME) and sends nothing more; then tries EXTRA
more from other loopback addresses (127.0.0.2, ...), which wbd must count
as the same user.  Prints "held H extra E" (E: those that got through the
handshake), then waits up to WAIT seconds for wbd to close the held ones
and prints "closed C after S s".

Usage: hostile-idle.py PORT EXPORT N EXTRA WAIT
"""

import select
import socket
import struct
import sys
import time

port, export = int(sys.argv[1]), sys.argv[2].encode()
n, extra, wait = int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])


def recv_all(s, k):
    b = b""
    while len(b) < k:
        d = s.recv(k - len(b))
        if not d:
            return None
        b += d
    return b


def connect(src):
    """A socket past the handshake, or None if wbd closed it."""
    s = socket.socket()
    s.settimeout(5)
    if src:
        s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    try:
        if recv_all(s, 18) is None:
            s.close()
            return None
        s.sendall(struct.pack(">I", 3))  # FIXED_NEWSTYLE | NO_ZEROES
        s.sendall(struct.pack(">QII", 0x49484156454F5054, 1, len(export))
                  + export)
        if recv_all(s, 10) is None:
            s.close()
            return None
    except OSError:
        s.close()
        return None
    return s


held = [s for s in (connect(None) for _ in range(n)) if s]
more = [s for s in (connect("127.0.0.%d" % (2 + i)) for i in range(extra))
        if s]
print("held %d extra %d" % (len(held), len(more)), flush=True)
t0 = time.monotonic()
open_ = held + more
closed = 0
while open_ and time.monotonic() - t0 < wait:
    r, _, _ = select.select(open_, [], [], 0.5)
    for s in r:
        try:
            d = s.recv(4096)
        except OSError:
            d = b""
        if not d:
            closed += 1
            open_.remove(s)
            s.close()
print("closed %d after %.1f s" % (closed, time.monotonic() - t0), flush=True)
