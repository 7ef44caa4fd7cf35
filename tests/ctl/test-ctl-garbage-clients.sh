#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Control clients that misbehave cannot stop the daemon serving NBD clients
# or other control clients: one that connects and says nothing, one that
# sends garbage, one that sends a line over 64 KiB, one that sends a request
# and never reads the answer, one that closes mid-line.  The daemon answers
# what it can with EPROTO and keeps going; the line over 64 KiB is counted
# (wbctl status: control.oversized_requests) and logged.
source "${SRCDIR:-$(dirname "$0")}/lib-ctl.sh"
need nbdinfo

add_export disk0 16M rw
start_wbd

"$SYSPY" - "$CTL" <<'PY' || fail "see above"
import json, socket, sys
path = sys.argv[1]

def conn():
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(path)
    return s

def answer(s):
    buf = b""
    while not buf.endswith(b"\n"):
        d = s.recv(65536)
        if not d:
            break
        buf += d
    return json.loads(buf.decode()) if buf else None

silent = conn()                          # never sends anything
partial = conn()
partial.sendall(b'{"v": 1, "cmd": "sta')  # half a line, then nothing
deaf = conn()                             # asks, never reads
for _ in range(50):
    deaf.sendall(b'{"v":1,"cmd":"status"}\n')

cases = [
    (b"garbage\n", "EPROTO"),
    (b"\x00\xff\xfe binary\n", "EPROTO"),
    (b"[1, 2, 3]\n", "EPROTO"),
    (b'"status"\n', "EPROTO"),
    (b'{"v": 1}\n', "EPROTO"),
    (b'{"v": 1, "cmd": "explode"}\n', "EPROTO"),
    (b'{"v": 99, "cmd": "status"}\n', "EPROTO"),
    (b'{"v": 1, "cmd": 7}\n', "EPROTO"),
    (b'{"v": 1, "cmd": "tune", "set": "x"}\n', "EINVAL"),
    (b'{"v": 1, "cmd": "flush", "exports": "disk0"}\n', "EINVAL"),
]
for req, code in cases:
    s = conn()
    s.sendall(req)
    a = answer(s)
    if not a or a.get("ok") is not False or a.get("code") != code:
        sys.exit("request %r: expected %s, got %r" % (req, code, a))
    # The connection still takes a good request after a bad one.
    s.sendall(b'{"v": 1, "cmd": "version"}\n')
    a = answer(s)
    if not a or a.get("ok") is not True:
        sys.exit("after %r, a good request got %r" % (req, a))
    s.close()

# Over 64 KiB without a newline: EPROTO, then the connection is closed.
# (The daemon closes with our unread bytes queued, so the kernel may reset
# the connection before the answer can be read: accept either.)
s = conn()
try:
    s.sendall(b"x" * (70 << 10))
    a = answer(s)
    if not a or a.get("code") != "EPROTO":
        sys.exit("a 70 KiB line got %r" % a)
    if s.recv(1) != b"":
        sys.exit("the connection stayed open after an over-long line")
except ConnectionResetError:
    print("a 70 KiB line: connection reset without the EPROTO answer")

# Several requests on one connection, in one write, answered in order.
s = conn()
s.sendall(b'{"v":1,"cmd":"version"}\n{"v":1,"cmd":"exports"}\n')
f = s.makefile("rb")
a, b = json.loads(f.readline()), json.loads(f.readline())
if not a.get("daemon_version") or not b.get("exports"):
    sys.exit("pipelined requests: %r, %r" % (a, b))
PY

# With idle control clients connected, NBD and control still work.
"$SYSPY" - "$CTL" <<'PY' &
import socket, sys, time
ss = []
for _ in range(5):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    ss.append(s)
ss[0].sendall(b'{"v": 1, "cmd": "sta')
time.sleep(30)
PY
idle=$!
_PIDS+=("$idle")
sleep 0.5
for ((i = 0; i < 3; i++)); do
	nbdinfo "$(uri_unix disk0)" >/dev/null || fail "NBD stopped working with idle control clients"
	expect_exit 0 wbctl status
	expect_exit 0 wbctl tune dirty_expire_centisecs=$((1000 + i))
done
kill "$idle"
nbdinfo "$(uri_tcp disk0)" >/dev/null || fail "NBD over TCP stopped working"
assert_alive
# The line over 64 KiB is counted and logged.
expect_exit 0 wbctl status --json
n=$("$SYSPY" -c 'import json, sys; print(json.load(sys.stdin)["control"]["oversized_requests"])' <<<"$OUT")
((n == 1)) || fail "control.oversized_requests is $n, expected 1"
grep -q 'control: a request of a client of uid [0-9]* is longer than 65536 bytes' "$LOG" ||
	fail "the over-long line was not logged"
