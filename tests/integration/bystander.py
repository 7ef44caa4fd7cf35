# SPDX-License-Identifier: GPL-2.0-or-later
"""bystander.py - a well-behaved client for the flood tests.

bystander(uri, pid, seconds) does verified 64 KiB writes and reads on an
export for SECONDS while hostile clients do their worst, sampling the
daemon's RSS after each round; it exits the test if a read returns wrong
data (an error raises).  Returns (peak RSS in KiB, rounds done).
"""

import os
import sys
import time

import nbd


def rss_kib(pid):
    with open("/proc/%s/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def bystander(uri, pid, seconds, span=16 << 20):
    h = nbd.NBD()
    h.connect_uri(uri)
    end = time.monotonic() + seconds
    peak = off = rounds = 0
    while time.monotonic() < end:
        buf = os.urandom(65536)
        h.pwrite(buf, off)
        if h.pread(65536, off) != buf:
            sys.exit("FAIL: a well-behaved client read back wrong data")
        off = (off + 65536) % span
        rounds += 1
        peak = max(peak, rss_kib(pid))
        time.sleep(0.02)
    h.shutdown()
    return peak, rounds
