# SPDX-License-Identifier: GPL-2.0-or-later
# drop-proxy.py LISTEN TARGET CONTROL - a Unix socket proxy in front of a
# remote that closes every connection through it, both ends, when the
# file CONTROL appears (then removes it and prints "dropped N"): a remote
# that drops idle connections, as a server's idle timeout or a NAT or
# firewall between does.  Connections made after a drop go through.
import os
import socket
import sys
import threading
import time

listen, target, control = sys.argv[1:4]
lock = threading.Lock()
live = []


def shut(*socks):
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def pump(a, b):
    try:
        while True:
            data = a.recv(1 << 20)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    shut(a, b)


def accept_loop(srv):
    while True:
        c, _ = srv.accept()
        t = socket.socket(socket.AF_UNIX)
        try:
            t.connect(target)
        except OSError:
            c.close()
            continue
        with lock:
            live.append((c, t))
        threading.Thread(target=pump, args=(c, t), daemon=True).start()
        threading.Thread(target=pump, args=(t, c), daemon=True).start()


srv = socket.socket(socket.AF_UNIX)
srv.bind(listen + ".tmp")
srv.listen(64)
os.rename(listen + ".tmp", listen)  # there once it listens
threading.Thread(target=accept_loop, args=(srv,), daemon=True).start()
while True:
    if os.path.exists(control):
        with lock:
            pairs = live[:]
            live.clear()
        for c, t in pairs:
            shut(c, t)
        print("dropped %d" % len(pairs), flush=True)
        os.unlink(control)
    time.sleep(0.02)
