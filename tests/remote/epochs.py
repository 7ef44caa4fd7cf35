#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""epochs.py - epochs of block writes, each ended by a FLUSH, every block
saying which epoch wrote it; and the check that an image of the remote
shows whole epochs, in order (the ordered write log's promise).

Epoch k (1..EPOCHS) writes PER_EPOCH of the first BLOCKS 4 KiB blocks,
chosen by a fixed seed, each block holding ("WBDEPOCH", k, its index)
over and over, then FLUSHes.  A state of the remote is valid when, for
some K, every block holds what the last epoch before K wrote there (or
zeroes if none did) or, for a block epoch K wrote, epoch K's: epochs
before K whole, and a part of epoch K (a crash between two FLUSHes may
keep any part of the writes between them).

  epochs.py write URI EPOCHS [PAUSE_S]
        write the epochs through URI, sleeping PAUSE_S after each FLUSH
        answered; prints "flushed K" as each FLUSH is answered
  epochs.py check IMAGE EPOCHS
        exit 0 printing the largest K for which IMAGE is valid; exit 1
        saying why no K is (a block from a later epoch while a block of
        an earlier one is missing, or a block torn or unknown)
  epochs.py serve EPOCHS
        check each image whose path is read on stdin, one a line,
        printing K or "FAIL why" for each
  epochs.py final IMAGE EPOCHS
        exit 0 if IMAGE holds every epoch whole, else 1 naming a block
"""
import random
import struct
import sys
import time

BLOCK = 4096
BLOCKS = 256
PER_EPOCH = 48
MAGIC = b"WBDEPOCH"


def plan(epochs):
    """[None, blocks of epoch 1, ..., blocks of epoch EPOCHS]."""
    rng = random.Random(20261205)
    return [None] + [sorted(rng.sample(range(BLOCKS), PER_EPOCH))
                     for _ in range(epochs)]


def block(epoch, index):
    return struct.pack("<8sII", MAGIC, epoch, index) * (BLOCK // 16)


def tags(path):
    """Each block's epoch: 0 for zeroes, -1 for anything else unknown."""
    with open(path, "rb") as f:
        data = f.read(BLOCKS * BLOCK)
    out = []
    for b in range(BLOCKS):
        d = data[b * BLOCK:(b + 1) * BLOCK]
        if d == bytes(BLOCK):
            out.append(0)
            continue
        magic, epoch, index = struct.unpack("<8sII", d[:16])
        out.append(epoch if magic == MAGIC and index == b and
                   d == block(epoch, b) else -1)
    return out


def write(uri, epochs, pause):
    import nbd
    h = nbd.NBD()
    h.connect_uri(uri)
    p = plan(epochs)
    for k in range(1, epochs + 1):
        for b in p[k]:
            h.pwrite(block(k, b), b * BLOCK)
        h.flush()
        print("flushed", k, flush=True)
        if pause:
            time.sleep(pause)
    h.shutdown()


def valid_ks(t, epochs):
    """Every K for which the blocks T are epochs < K whole and a part of
    epoch K."""
    p = plan(epochs)
    last = [0] * BLOCKS          # the last epoch before K to write each
    ks = []
    for k in range(0, epochs + 1):
        inside = set(p[k]) if k else set()
        if all(t[b] == last[b] or (b in inside and t[b] == k)
               for b in range(BLOCKS)):
            ks.append(k)
        for b in inside:
            last[b] = k
    return ks


def judge(path, epochs):
    """(K, None) with the largest K for which PATH is valid, or (None,
    why not)."""
    t = tags(path)
    torn = [b for b in range(BLOCKS) if t[b] < 0]
    if torn:
        return None, ("block %d holds no epoch's data (torn or unknown)" %
                      torn[0])
    ks = valid_ks(t, epochs)
    if ks:
        return ks[-1], None
    # Why not: the newest epoch seen, and a block that misses an older
    # epoch's write which that one needs.
    p = plan(epochs)
    newest = max(t)
    last = [0] * BLOCKS
    for k in range(1, newest):
        for b in p[k]:
            last[b] = k
    for b in range(BLOCKS):
        if t[b] < last[b]:
            return None, ("not whole epochs in order: a block of epoch %d "
                          "is there, but block %d holds epoch %d where "
                          "epoch %d wrote it" % (newest, b, t[b], last[b]))
    return None, "not whole epochs in order (newest epoch seen %d)" % newest


def check(path, epochs):
    k, why = judge(path, epochs)
    if why:
        sys.exit(why)
    print(k)


def serve(epochs):
    """check for each path read on stdin, one a line: "K" or "FAIL why"
    on stdout (a test's coprocess: one Python start for every sample)."""
    for line in sys.stdin:
        k, why = judge(line.strip(), epochs)
        print(k if why is None else "FAIL " + why, flush=True)


def final(path, epochs):
    t = tags(path)
    p = plan(epochs)
    last = [0] * BLOCKS
    for k in range(1, epochs + 1):
        for b in p[k]:
            last[b] = k
    for b in range(BLOCKS):
        if t[b] != last[b]:
            sys.exit("block %d holds epoch %d, not %d" % (b, t[b], last[b]))


def main():
    cmd = sys.argv[1]
    if cmd == "write":
        write(sys.argv[2], int(sys.argv[3]),
              float(sys.argv[4]) if len(sys.argv) > 4 else 0)
    elif cmd == "serve":
        serve(int(sys.argv[2]))
    elif cmd == "check":
        check(sys.argv[2], int(sys.argv[3]))
    elif cmd == "final":
        final(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
