#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Requests larger than the 32 MiB advertised, on raw sockets:
#  1. a client that did not ask for block sizes (GO without
#     NBD_INFO_BLOCK_SIZE, or EXPORT_NAME) may WRITE and READ 40 MiB, up to
#     limits.max_request_bytes (64 MiB by default), with simple and with
#     structured replies;
#  2. above it, a READ gets EINVAL and a WRITE gets EINVAL after its
#     payload is read off, and the connection goes on (the data is
#     untouched);
#  3. a client that asked for block sizes is held to the 32 MiB.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

add_export disk0 160M rw
write_cache_config 256M "dirty_background_ratio = 50; dirty_ratio = 80;"
start_wbd

"$PYTHON" - "$SRCDIR" "$SOCK" <<'PY' || fail "see above"
import os, sys
sys.path.insert(0, sys.argv[1])
from nbdraw import (Raw, CaseFailed, REP_ACK, OPT_STRUCTURED_REPLY, CMD_READ,
                    CMD_WRITE, INFO_BLOCK_SIZE, EINVAL)
import nbdraw
MiB = 1 << 20
nbdraw.MAX_BLOCK = 128 * MiB    # its sanity check on a reply's length

class Args:
    unix = sys.argv[2]

def conn(block_sizes=False, structured=False, export_name=False):
    c = Raw(Args)
    c.greeting()
    if structured:
        c.send_option(OPT_STRUCTURED_REPLY)
        assert c.option_replies(OPT_STRUCTURED_REPLY)[-1][0] == REP_ACK
        c.structured = True
    if export_name:
        c.send_option(1, b"disk0")
        c.recv_exact(10)
        return c
    rtype, _ = c.go("disk0", infos=(INFO_BLOCK_SIZE,) if block_sizes else ())
    if rtype != REP_ACK:
        raise CaseFailed("GO: %x" % rtype)
    return c

def write(c, off, data, want=0):
    c.request(CMD_WRITE, off, len(data), payload=data)
    c.expect_error("WRITE of %d MiB" % (len(data) // MiB), want)

def read(c, off, n, want=0):
    c.request(CMD_READ, off, n, handle=5)
    h, err, data = c.reply(n, off)
    if err != want:
        raise CaseFailed("READ of %d bytes: error %d, expected %d" % (n, err, want))
    return data

big = os.urandom(40 * MiB)
c = conn()
write(c, 8 * MiB, big)
if read(c, 8 * MiB, 40 * MiB) != big:
    raise CaseFailed("40 MiB read back differ")
c.close()
for how in ({"structured": True}, {"export_name": True}):
    c = conn(**how)
    if read(c, 8 * MiB, 40 * MiB) != big:
        raise CaseFailed("40 MiB read back differ (%r)" % how)
    c.close()
print("ok   40 MiB WRITE and READ without block sizes")

c = conn(structured=True)
read(c, 0, 64 * MiB + 1, EINVAL)
write(c, 8 * MiB, b"\x77" * (64 * MiB + 4096), EINVAL)
if read(c, 8 * MiB, 4096) != big[:4096]:
    raise CaseFailed("a refused WRITE changed the data")
print("ok   above 64 MiB: EINVAL, the WRITE's payload skipped")
c.close()

c = conn(block_sizes=True)
read(c, 0, 32 * MiB + 1, EINVAL)
write(c, 8 * MiB, b"\x66" * (32 * MiB + 4096), EINVAL)
if read(c, 8 * MiB, 4096) != big[:4096]:
    raise CaseFailed("a refused WRITE changed the data")
print("ok   with block sizes agreed: 32 MiB, then EINVAL")
c.close()
PY
assert_alive
