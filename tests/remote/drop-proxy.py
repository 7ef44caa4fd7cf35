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
# While the file CONTROL.atflush exists, a FLUSH a client sends (its
# request seen in what it sends) first closes every other connection
# through the proxy, both ends, waits a second for the remote to take
# their ends, removes CONTROL.atflush, prints "atflush dropped N", and
# goes on to the remote: connections closed while a FLUSH is on its way
# (a server restarting, one that drops connections), the FLUSH answered.
# When the file CONTROL.freeze appears, every connection through the
# proxy then is frozen: the remote's end is closed (the server sees the
# client go), the client's is left open and what the client sends on it
# is swallowed, unanswered; it prints "froze N" and removes the file.  A
# remote host that lost power and came back: the client hears nothing
# of it on its old connections, and its new ones reach the server again.
import os
import re
import socket
import sys
import threading
import time

listen, target, control = sys.argv[1:4]
stall = control + ".stall"
atflush = control + ".atflush"
freeze = control + ".freeze"
frozen = set()
FLUSH = re.compile(rb"\x25\x60\x95\x13..\x00\x03", re.S)
lock = threading.Lock()
live = []


def shut(*socks):
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def drop_others(a):
    with lock:
        if not os.path.exists(atflush):
            return
        others = [p for p in live if p[0] is not a]
        live[:] = [p for p in live if p[0] is a]
        for c, t in others:
            shut(c, t)
        time.sleep(1)
        os.unlink(atflush)
        print("atflush dropped %d" % len(others), flush=True)


def pump(a, b, upstream):
    try:
        while True:
            data = a.recv(1 << 20)
            if not data:
                break
            if (a if upstream else b) in frozen:
                continue
            if upstream and os.path.exists(atflush) and FLUSH.search(data):
                drop_others(a)
            if upstream and len(data) > 1024 and os.path.exists(stall):
                print("swallowed %d" % len(data), flush=True)
                continue
            b.sendall(data)
    except OSError:
        pass
    # A frozen connection's client end stays open, and silent.
    shut(*[s for s in (a, b) if s not in frozen])


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
    if os.path.exists(freeze):
        with lock:
            pairs = live[:]
            live.clear()
        for c, t in pairs:
            frozen.add(c)
            shut(t)
        print("froze %d" % len(pairs), flush=True)
        os.unlink(freeze)
    if os.path.exists(control):
        with lock:
            pairs = live[:]
            live.clear()
        for c, t in pairs:
            shut(c, t)
        print("dropped %d" % len(pairs), flush=True)
        os.unlink(control)
    time.sleep(0.02)
