#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""readahead.py - read-ahead as a client sees it, through wbctl status.

Usage: readahead.py URI WBCTL CONTROL_SOCKET DATA_FILE
The export holds DATA_FILE's bytes (at least 80 MiB), none of them in
wbd's cache yet.  Exit 0 if all holds, else 1 with the reason:

  1. 4 MiB written and not flushed stay dirty through everything below;
  2. random 4 KiB reads read nothing ahead;
  3. 16 MiB read in order, 256 KiB at a time, are read ahead (pages read
     ahead, and hits on them), return the data, and read the device about
     once (no more than the 16 MiB, plus what is read ahead past them: at
     most one and a half windows of 4 MiB, plus the reads before it
     started);
  4. 32 MiB read in order, 1 MiB at a time with 8 reads in flight (a
     client that reads ahead by itself), are read ahead by no more than
     8 MiB (the first windows, while its reads ramp up; a client reading
     one at a time gets nearly all of it read ahead), and return the data.
"""
import json
import random
import subprocess
import sys

import nbd

uri, wbctl, ctl, path = sys.argv[1:5]
MiB = 1 << 20
data = open(path, "rb").read()


def status():
    out = subprocess.run([wbctl, "-s", ctl, "status", "--json"], check=True,
                         capture_output=True, text=True).stdout
    st = json.loads(out)
    return st["cache"], st["exports"][0], st["devices"][0]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


h = nbd.NBD()
h.connect_uri(uri)
h.pwrite(b"\x5a" * (4 * MiB), 72 * MiB)
cache, export, _ = status()
if export["dirty_bytes"] != 4 * MiB:
    fail("4 MiB written, %d dirty" % export["dirty_bytes"])

rnd = random.Random(7)
for _ in range(64):
    off = rnd.randrange(32 * MiB, 64 * MiB, 4096)
    if h.pread(4096, off) != data[off:off + 4096]:
        fail("random read at %d returned wrong data" % off)
c0, _, d0 = status()
if c0["readahead_bytes"] != cache["readahead_bytes"]:
    fail("random reads read %d bytes ahead" %
         (c0["readahead_bytes"] - cache["readahead_bytes"]))

for off in range(0, 16 * MiB, 256 << 10):
    if h.pread(256 << 10, off) != data[off:off + (256 << 10)]:
        fail("sequential read at %d returned wrong data" % off)
c1, export, d1 = status()
ahead = c1["readahead_bytes"] - c0["readahead_bytes"]
hits = c1["readahead_hits"] - c0["readahead_hits"]
read = d1["read_bytes"] - d0["read_bytes"]
print("sequential 16 MiB: %.1f MiB read ahead, %d pages of it hit, "
      "%.1f MiB read from the device" % (ahead / MiB, hits, read / MiB))
if ahead <= 0 or hits <= 0:
    fail("16 MiB read in order were not read ahead")
if read > 24 * MiB:
    fail("16 MiB read in order read %d bytes from the device" % read)
if export["dirty_bytes"] != 4 * MiB:
    fail("the dirty data went: %d bytes dirty" % export["dirty_bytes"])
if h.pread(MiB, 72 * MiB) != b"\x5a" * MiB:
    fail("the dirty data reads back wrong")

# 4: a client with 8 reads of 1 MiB in flight, in order, over [32, 64) MiB
# (only the random 4 KiB reads above touched it).
bufs = {}
next_off, end = 32 * MiB, 64 * MiB
while next_off < end or bufs:
    while next_off < end and len(bufs) < 8:
        b = nbd.Buffer(MiB)
        bufs[h.aio_pread(b, next_off)] = (b, next_off)
        next_off += MiB
    h.poll(-1)
    for cookie in [c for c in bufs if h.aio_command_completed(c)]:
        b, off = bufs.pop(cookie)
        if b.to_bytearray() != data[off:off + MiB]:
            fail("pipelined read at %d returned wrong data" % off)
c2, _, _ = status()
deep = c2["readahead_bytes"] - c1["readahead_bytes"]
print("32 MiB in 1 MiB reads, 8 in flight: %.1f MiB read ahead"
      % (deep / MiB))
if deep > 8 * MiB:
    fail("a client with 8 MiB of reads in flight was read ahead by %d bytes"
         % deep)
h.shutdown()
