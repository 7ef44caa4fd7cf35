#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# limits.stall_timeout_s: a connection that holds replies it does not read
# (32 MiB READs pipelined, never read) or a WRITE payload it does not
# finish (a 1 MiB WRITE header and 1 KiB of it, then nothing) is closed
# once no byte has moved for that long; the memory budget it held is given
# back, wbctl status counts it and the log says why (once in 10 s at most).
# A client that reads slowly but keeps reading, and one that is idle, are
# left alone.  Each connection is a client of its own (its own address).
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd
# Clients of several users (this host's TCP clients are told apart by user).
[[ $EUID == 0 ]] || skip "needs root, to make clients of other users"

add_export disk0 128M rw
write_config
echo 'limits = { stall_timeout_s = 2; };' >>"$CONF"
start_wbd
status_limits() {
	"$WBCTL" -s "${SOCK%/*}/control.sock" status --json | "$PYTHON" -c 'import json, sys
l = json.load(sys.stdin)["limits"]
print(l["stall_timeout_s"], l["stalled"], l["inflight_bytes"])'
}
read -r timeout stalled used <<<"$(status_limits)"
[[ $timeout == 2 && $stalled == 0 ]] || fail "status limits: stall_timeout_s $timeout, stalled $stalled"

"$PYTHON" - "$PORT" "$SRCDIR" <<'PY' || fail "see above"
import os, socket, struct, sys, time, types
port = int(sys.argv[1])
sys.path.insert(0, sys.argv[2])
import nbdraw

def connect(src, uid):
    # Each from its own address and user: a client of its own (this
    # host's clients are told apart by the user owning the socket), whose
    # share of the budget (limits.max_client_share) the others do not hold.
    r = nbdraw.Raw.__new__(nbdraw.Raw)
    os.seteuid(uid)
    try:
        r.s, r.structured = socket.socket(), False
    finally:
        os.seteuid(0)
    r.s.settimeout(nbdraw.TIMEOUT)
    r.s.bind((src, 0))
    r.s.connect(("127.0.0.1", port))
    r.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    r.open("disk0")
    return r.s

def recv_exact(s, n):
    b = b""
    while len(b) < n:
        chunk = s.recv(n - len(b))
        if not chunk:
            raise EOFError("closed")
        b += chunk
    return b

def request(cmd, cookie, off, n):
    return struct.pack(">IHHQQI", nbdraw.NBD_REQUEST_MAGIC, 0, cmd, cookie,
                       off, n)

def closed_within(s, seconds):
    # The server closed it: a read finds EOF (or a reset) once what it
    # sent before is drained.
    s.settimeout(0.5)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            if not s.recv(1 << 20):
                return True
        except socket.timeout:
            continue
        except ConnectionResetError:
            return True
    return False

hog = connect("127.0.0.1", 0)              # READs, never read
for i in range(4):
    hog.sendall(request(0, i + 1, i << 25, 32 << 20))
payload = connect("127.0.0.3", 1)          # a WRITE it does not finish
payload.sendall(request(1, 1, 0, 1 << 20) + b"\0" * 1024)
idle = connect("127.0.0.4", 2)             # nothing at all
slow = connect("127.0.0.2", 65534)         # reads, slowly
for i in range(4):
    slow.sendall(request(0, i + 1, i << 25, 32 << 20))
got, want = 0, 4 * (16 + (32 << 20))
# Its READs miss the cache: under a sanitizer (ThreadSanitizer: 5 s
# and more) the first bytes may be long in coming.
slow.settimeout(60)
start = time.monotonic()
while got < want:
    chunk = slow.recv(min(want - got, 1 << 20))
    if not chunk:
        sys.exit("FAIL: the slow reader was closed after %d bytes" % got)
    got += len(chunk)
    time.sleep(0.002)           # about 500 MiB/s at most: seconds
print("the slow reader took its 128 MiB in %.1f s" % (time.monotonic() - start))
time.sleep(1)
for s, what in ((hog, "the READs never read"), (payload, "the unfinished WRITE")):
    if not closed_within(s, 5):
        sys.exit("FAIL: the connection with %s was not closed" % what)
# Left alone: the idle one answers a READ.
idle.sendall(request(0, 9, 0, 4096))
idle.settimeout(5)
hdr = recv_exact(idle, 16)
if struct.unpack(">IIQ", hdr)[1] != 0:
    sys.exit("FAIL: the idle connection's READ failed")
recv_exact(idle, 4096)
for s in (hog, payload, idle, slow):
    s.close()
PY
for _ in $(seq 50); do
	read -r timeout stalled used <<<"$(status_limits)"
	[[ $used == 0 ]] && break
	sleep 0.1
done
((stalled == 2)) || fail "limits.stalled is $stalled, expected 2"
((used == 0)) || fail "$used bytes of the budget still held"
# One line for both (at most one in 10 s), naming the reason.
grep -Eq '(replies not read|a request.s payload not finished) for 2 s \(limits.stall_timeout_s\): closing' "$LOG" ||
	fail "no log line for the stalled connections"
log "2 stalled connections closed (replies not read, a payload not finished); a slow reader and an idle one left alone"
assert_alive
stop_wbd
