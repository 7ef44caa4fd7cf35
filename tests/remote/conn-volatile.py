# SPDX-License-Identifier: GPL-2.0-or-later
# conn-volatile.py - an nbdkit python plugin: a multi-conn disk whose
# volatile write cache is kept per connection.  A write without FUA is
# answered at once and seen on every connection, but until a FLUSH (on
# any connection: multi-conn) saves the whole disk to FILE, it belongs to
# the connection that wrote it, and is dropped, back to what FILE holds,
# when that connection closes.  NBD promises nothing of an unflushed
# write on a connection that ended without a FLUSH; this remote takes it
# at its word for one connection at a time, so a client sees the loss of
# one connection alone.  Every close logs "close: conn N dropped K
# blocks" on stderr.
#
# slow=PATH: while PATH exists, the next write that covers byte slow_off
# (default 8 MiB) removes PATH and sleeps slow_s seconds (default 3)
# before it is done: a reply late enough for a client's timeout to give
# the connection up.
#
#   nbdkit -U SOCK python conn-volatile.py file=PATH size=BYTES [slow=PATH]
import builtins
import os
import sys
import threading
import time

import nbdkit

API_VERSION = 2
BLOCK = 4096

path = None
size = 16 << 20
slow = None
slow_off = 8 << 20
slow_s = 3.0
store = None
owner = {}           # block -> the connection whose unflushed write it holds
lock = threading.Lock()
next_conn = 0


def thread_model():
    return nbdkit.THREAD_MODEL_PARALLEL


def config(key, value):
    global path, size, slow, slow_off, slow_s
    if key == "file":
        path = value
    elif key == "size":
        size = int(value)
    elif key == "slow":
        slow = value
    elif key == "slow_off":
        slow_off = int(value)
    elif key == "slow_s":
        slow_s = float(value)
    else:
        raise RuntimeError("unknown parameter %s" % key)


def config_complete():
    global store
    if path is None:
        raise RuntimeError("file= is required")
    store = bytearray(size)
    if os.path.exists(path):
        with builtins.open(path, "rb") as f:
            data = f.read(size)
        store[:len(data)] = data
    else:
        save()


def open(readonly):
    global next_conn
    with lock:
        next_conn += 1
        return next_conn


def close(h):
    with lock:
        mine = [b for b, c in owner.items() if c == h]
        if mine:
            with builtins.open(path, "rb") as f:
                for b in mine:
                    f.seek(b * BLOCK)
                    old = f.read(BLOCK).ljust(BLOCK, b"\0")
                    store[b * BLOCK:(b + 1) * BLOCK] = old
                    del owner[b]
    # One write: print() sends the line's end apart, and two closes at
    # once ran their lines together.
    sys.stderr.write("close: conn %d dropped %d blocks\n" % (h, len(mine)))
    sys.stderr.flush()


def get_size(h):
    return size


def can_flush(h):
    return True


def can_fua(h):
    return nbdkit.FUA_NATIVE


def can_multi_conn(h):
    return True


def save():
    tmp = path + ".tmp"
    with builtins.open(tmp, "wb") as f:      # open() is the plugin's
        f.write(store)
    os.replace(tmp, path)
    owner.clear()


def pread(h, buf, offset, flags):
    with lock:
        buf[:] = store[offset:offset + len(buf)]


def pwrite(h, buf, offset, flags):
    if slow and offset <= slow_off < offset + len(buf):
        try:
            os.unlink(slow)
            time.sleep(slow_s)
        except FileNotFoundError:
            pass
    with lock:
        store[offset:offset + len(buf)] = buf
        if flags & nbdkit.FLAG_FUA:
            save()
        else:
            for b in range(offset // BLOCK,
                           (offset + len(buf) + BLOCK - 1) // BLOCK):
                owner[b] = h


def flush(h, flags):
    with lock:
        save()
