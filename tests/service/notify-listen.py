#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""notify-listen.py SOCKET OUT: play systemd's part of the sd_notify(3)
protocol for a test.  Bind a Unix datagram socket at SOCKET and append
each message received to OUT: a line "-- N" (N counting from 1), then each
of its KEY=VALUE fields on a line of its own, flushed at once.  Runs until
killed."""
import os
import socket
import sys

path, out = sys.argv[1], sys.argv[2]
try:
    os.unlink(path)
except FileNotFoundError:
    pass
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
n = 0
with open(out, "a", buffering=1) as f:
    while True:
        data = s.recv(65536)
        n += 1
        f.write(f"-- {n}\n")
        for field in data.decode("utf-8", "replace").split("\n"):
            if field:
                f.write(field + "\n")
