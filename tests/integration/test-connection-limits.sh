#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Slots: one client cannot take every connection.  With
# limits.max_connections_per_client = 4, a fifth connection from the same
# uid (Unix socket) is closed at once, while another user's client (TCP,
# from 127.0.0.1 too: counted by its uid) is still served with verified
# I/O; limits.max_connections
# caps the total; closed connections give their slots back; refusals are
# counted in wbctl status and logged once per 10 s, not once each.  Then,
# with the daemon's open file limit at 64: clients beyond what it can open
# are refused at once (no hang, no busy loop, no log flood), and served
# again once descriptors are free.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd
need setpriv
[[ $(id -u) == 0 ]] || skip "needs root to run a client as another user"
/usr/bin/python3 -c 'import nbd' 2>/dev/null ||
	skip "/usr/bin/python3 cannot import nbd"

add_export disk0 16M rw
write_config
echo 'limits = { max_connections = 6; max_connections_per_client = 4; };' >>"$CONF"
start_wbd

"$PYTHON" - "$(uri_unix disk0)" "$(uri_tcp disk0)" <<'PY' || fail "see above"
import nbd, os, subprocess, sys, time
unix_uri, tcp_uri = sys.argv[1:3]

def connect(uri):
    h = nbd.NBD()
    h.connect_uri(uri)
    return h

def refused(uri, what):
    t = time.monotonic()
    try:
        connect(uri)
    except nbd.Error:
        if time.monotonic() - t > 5:
            sys.exit("FAIL: %s: refused, but only after %.1f s"
                     % (what, time.monotonic() - t))
        return
    sys.exit("FAIL: %s: accepted" % what)

def verified_io(h, off):
    buf = os.urandom(65536)
    h.pwrite(buf, off)
    h.flush()
    if h.pread(65536, off) != buf:
        sys.exit("FAIL: data read back wrong")

# Another user (nobody) over TCP: two connections, verified I/O, then a
# third refused (a seventh in all, max_connections = 6); it holds its two
# until its stdin closes.
OTHER = r'''
import nbd, os, sys, time
hs = []
for _ in range(2):
    h = nbd.NBD()
    h.connect_uri(sys.argv[1])
    hs.append(h)
buf = os.urandom(65536)
hs[0].pwrite(buf, 0)
hs[0].flush()
if hs[0].pread(65536, 0) != buf:
    sys.exit("FAIL: data read back wrong")
print("served", flush=True)
t = time.monotonic()
try:
    nbd.NBD().connect_uri(sys.argv[1])
    print("accepted", flush=True)
except nbd.Error:
    print("refused %.1f" % (time.monotonic() - t), flush=True)
sys.stdin.read()
for h in hs:
    h.shutdown()
'''

held = [connect(unix_uri) for _ in range(4)]
refused(unix_uri, "a fifth connection from the same uid")
other = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534",
                          "--clear-groups", "/usr/bin/python3", "-c", OTHER,
                          tcp_uri], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
if other.stdout.readline().strip() != "served":
    sys.exit("FAIL: another user's client over TCP was not served")
ans = other.stdout.readline().split()
if not ans or ans[0] != "refused":
    sys.exit("FAIL: a seventh connection in all (max_connections = 6): %r"
             % ans)
if float(ans[1]) > 5:
    sys.exit("FAIL: the seventh connection refused only after %s s" % ans[1])
verified_io(held[0], 1 << 20)
held.pop().shutdown()              # a slot given back ...
time.sleep(0.5)
h = connect(unix_uri)              # ... is taken again
verified_io(h, 2 << 20)
for x in held + [h]:
    x.shutdown()
other.stdin.close()
if other.wait() != 0:
    sys.exit("FAIL: the other user's client failed")
PY

status=$("$WBCTL" -s "$T/control.sock" status --json) ||
	fail "wbctl status failed"
"$PYTHON" - "$status" <<'PY' || fail "see above"
import json, sys
lim = json.loads(sys.argv[1])["limits"]
if lim["max_connections"] != 6 or lim["max_connections_per_client"] != 4:
    sys.exit("FAIL: status shows the limits as %r" % lim)
if lim["refused"] != 2:
    sys.exit("FAIL: status counts %d refusals, expected 2" % lim["refused"])
PY
n=$(grep -c 'refused: ' "$LOG")
((n == 1)) || fail "$n refusal lines in the log within 10 s, expected 1"
grep -q 'max_connections_per_client' "$LOG" ||
	fail "the refusal does not name the limit"
stop_wbd
check_logs_clean || exit 1

log "out of descriptors"
# The daemon with an open file limit of 64: a wrapper sets it and execs.
cat >"$T/wbd-low-nofile" <<SH
#!/bin/sh
ulimit -n 64
exec "$WBD" "\$@"
SH
chmod +x "$T/wbd-low-nofile"
WBD=$T/wbd-low-nofile
write_config
echo 'limits = { max_connections = 1000; max_connections_per_client = 1000; };' >>"$CONF"
: >"$LOG"
start_wbd
grep -q 'open file limit (64) does not cover limits.max_connections' "$LOG" ||
	fail "start-up did not say the file limit is too low"

"$PYTHON" - "$SOCK" "$(uri_unix disk0)" <<'PY' || fail "see above"
import nbd, os, socket, struct, sys, time
sock_path, uri = sys.argv[1:3]
# Hold connections until the daemon runs out of descriptors: each one gets
# the greeting, or is closed at once; none may hang.
held, closed = [], 0
for i in range(100):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(sock_path)
    try:
        data = s.recv(8)
    except socket.timeout:
        sys.exit("FAIL: connection %d got no greeting and was not closed "
                 "within 5 s" % i)
    if not data:
        closed += 1
        s.close()
    else:
        held.append(s)
if closed == 0:
    sys.exit("FAIL: 100 connections held with an open file limit of 64")
print("%d connections held, %d refused" % (len(held), closed))
for s in held:
    s.close()
time.sleep(1)
h = nbd.NBD()
h.connect_uri(uri)
buf = os.urandom(4096)
h.pwrite(buf, 0)
if h.pread(4096, 0) != buf:
    sys.exit("FAIL: data read back wrong after descriptors were freed")
h.shutdown()
PY
n=$(grep -c ': accept' "$LOG")
((n <= 2)) || fail "$n accept failures logged: expected at most 2 (rate-limited)"
assert_alive
stop_wbd
check_logs_clean || exit 1
