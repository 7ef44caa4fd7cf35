# SPDX-License-Identifier: GPL-2.0-or-later
# drop-proxy.py LISTEN TARGET CONTROL - a Unix socket proxy in front of a
# remote that closes every connection through it, both ends, when the
# file CONTROL appears (then removes it and prints "dropped N"): a remote
# that drops idle connections, as a server's idle timeout or a NAT or
# firewall between does.  Connections made after a drop go through.
# While the file CONTROL.stall exists, what a client sends in pieces of
# more than 1 KiB (a write's payload) is swallowed, on every connection,
# old and new; the rest (handshakes, reads, FLUSH) goes through: a
# remote that takes connections and stops answering writes.
import os
import socket
import sys
import threading
import time

listen, target, control = sys.argv[1:4]
stall = control + ".stall"
lock = threading.Lock()
live = []


def shut(*socks):
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def pump(a, b, upstream):
    try:
        while True:
            data = a.recv(1 << 20)
            if not data:
                break
            if upstream and len(data) > 1024 and os.path.exists(stall):
                print("swallowed %d" % len(data), flush=True)
                continue
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
        threading.Thread(target=pump, args=(c, t, True), daemon=True).start()
        threading.Thread(target=pump, args=(t, c, False), daemon=True).start()


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
