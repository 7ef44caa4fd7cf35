# SPDX-License-Identifier: GPL-2.0-or-later
# flushed-only.py - an nbdkit python plugin: a disk with a volatile write
# cache, as NBD allows.  A write without FUA is answered at once but kept
# only in the process until a FLUSH (or a FUA write) saves the whole disk
# to FILE; a server started again on FILE has only what was saved.  Kill
# it (SIGKILL) and start it again to play a remote host that rebooted.
#
#   nbdkit -U SOCK python flushed-only.py file=PATH size=BYTES
import builtins
import os

import nbdkit

API_VERSION = 2

path = None
size = 16 << 20
store = None


def thread_model():
    return nbdkit.THREAD_MODEL_SERIALIZE_ALL_REQUESTS


def config(key, value):
    global path, size
    if key == "file":
        path = value
    elif key == "size":
        size = int(value)
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


def open(readonly):
    return 1


def get_size(h):
    return size


def can_flush(h):
    return True


def can_fua(h):
    return nbdkit.FUA_NATIVE


def can_multi_conn(h):
    return False


def save():
    tmp = path + ".tmp"
    with builtins.open(tmp, "wb") as f:      # open() is the plugin's
        f.write(store)
    os.replace(tmp, path)


def pread(h, buf, offset, flags):
    buf[:] = store[offset:offset + len(buf)]


def pwrite(h, buf, offset, flags):
    store[offset:offset + len(buf)] = buf
    if flags & nbdkit.FLAG_FUA:
        save()


def flush(h, flags):
    save()
