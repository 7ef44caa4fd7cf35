# SPDX-License-Identifier: GPL-2.0-or-later
# weak-multiconn.py - an nbdkit python plugin: a RAM disk that offers
# multi-conn and keeps to the letter of it, no more.  NBD's multi-conn
# promises a write is seen on every connection once a FLUSH (on any
# connection) has covered it; real servers share one cache and show it at
# once.  This one does not: a write without FUA stays pending, seen by
# the connection that wrote it, until a FLUSH (or a FUA write) on any
# connection applies every pending write.  A client that reads on one
# connection what it wrote on another without a FLUSH in between reads
# the old data, as the spec allows; and its block status
# (base:allocation) likewise shows a chunk as data only once flushed.
#
#   nbdkit -U SOCK python weak-multiconn.py size=BYTES
import nbdkit

API_VERSION = 2

size = 64 << 20
store = None
pending = []            # (connection, offset, bytes), oldest first
connections = 0
CHUNK = 64 << 10        # block status: a chunk is data once written
allocated = set()       # chunks written, flushed


def thread_model():
    return nbdkit.THREAD_MODEL_SERIALIZE_ALL_REQUESTS


def config(key, value):
    global size
    if key == "size":
        size = int(value)
    else:
        raise RuntimeError("unknown parameter %s" % key)


def config_complete():
    global store
    store = bytearray(size)


def open(readonly):
    global connections
    connections += 1
    return connections


def get_size(h):
    return size


def can_multi_conn(h):
    return True


def can_flush(h):
    return True


def can_fua(h):
    return nbdkit.FUA_NATIVE


def chunks(off, length):
    return range(off // CHUNK, (off + length - 1) // CHUNK + 1)


def apply_pending():
    for _, off, data in pending:
        store[off:off + len(data)] = data
        allocated.update(chunks(off, len(data)))
    pending.clear()


def can_extents(h):
    return True


def extents(h, count, offset, flags):
    # As the data: what this connection wrote, and what was flushed.
    mine = set()
    for conn, off, data in pending:
        if conn == h:
            mine.update(chunks(off, len(data)))
    pos, end, out = offset, offset + count, []
    while pos < end:
        c = pos // CHUNK
        nxt = min((c + 1) * CHUNK, end)
        data = c in allocated or c in mine
        out.append((pos, nxt - pos,
                    0 if data else nbdkit.EXTENT_HOLE | nbdkit.EXTENT_ZERO))
        pos = nxt
    return out


def pread(h, buf, offset, flags):
    n = len(buf)
    buf[:] = store[offset:offset + n]
    # Read your own writes: this connection's pending ones, in order.
    for conn, off, data in pending:
        if conn != h:
            continue
        lo, hi = max(off, offset), min(off + len(data), offset + n)
        if lo < hi:
            buf[lo - offset:hi - offset] = data[lo - off:hi - off]


def pwrite(h, buf, offset, flags):
    pending.append((h, offset, bytes(buf)))
    if flags & nbdkit.FLAG_FUA:
        apply_pending()


def flush(h, flags):
    apply_pending()
