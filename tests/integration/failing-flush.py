# SPDX-License-Identifier: GPL-2.0-or-later
# failing-flush.py - an nbdkit python plugin: a disk whose FLUSH fails
# while the file FAIL exists, and then loses everything written since the
# last good flush, as a kernel's page cache does when writeback to a disk
# fails (the pages it could not write are marked clean, the error is
# reported once).  Writes are answered at once and held in the process; a
# good FLUSH saves the whole disk to FILE, a failed one (EIO) drops them.
#
#   nbdkit python failing-flush.py file=PATH size=BYTES fail=PATH
import builtins
import errno
import os

import nbdkit

API_VERSION = 2

path = None
fail = None
size = 16 << 20
stable = None       # what the last good flush saved
current = None      # what reads see


def thread_model():
    return nbdkit.THREAD_MODEL_SERIALIZE_ALL_REQUESTS


def config(key, value):
    global path, size, fail
    if key == "file":
        path = value
    elif key == "size":
        size = int(value)
    elif key == "fail":
        fail = value
    else:
        raise RuntimeError("unknown parameter %s" % key)


def config_complete():
    global stable, current
    if path is None or fail is None:
        raise RuntimeError("file= and fail= are required")
    stable = bytearray(size)
    current = bytearray(size)


def open(readonly):
    return 1


def get_size(h):
    return size


def can_flush(h):
    return True


def can_multi_conn(h):
    return False


def pread(h, buf, offset, flags):
    buf[:] = current[offset:offset + len(buf)]


def pwrite(h, buf, offset, flags):
    current[offset:offset + len(buf)] = buf


def flush(h, flags):
    if os.path.exists(fail):
        current[:] = stable
        nbdkit.set_error(errno.EIO)
        raise RuntimeError("failing flush: unflushed writes dropped")
    stable[:] = current
    tmp = path + ".tmp"
    with builtins.open(tmp, "wb") as f:      # open() is the plugin's
        f.write(stable)
    os.replace(tmp, path)
