#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A TCP client of another host is counted by its address, a client of
# this host by its uid (limits.max_connections_per_client), and each gets
# its own idle timeout.  The other host is a network namespace joined by a
# veth pair.  A local service (run as nobody) listens on 0.0.0.0:Q, and
# the remote client connects from port Q: the kernel's lookup of the
# client's socket falls back to that listener, which must not make the
# remote client "uid 65534" of this host.  With
# max_connections_per_client = 2, the remote client's third connection
# is refused by its address; with idle_timeout_s = 2 and
# local_idle_timeout_s = 0, its idle connection is closed (by
# limits.idle_timeout_s) while a local idle one stays.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd
need ip setpriv
[[ $(id -u) == 0 ]] || skip "needs root for a network namespace"
[[ -x /usr/bin/python3 ]] || skip "/usr/bin/python3 not found"

NS=wbd-it-$$
A=vwa$$ B=vwb$$
NET=10.$((200 + $$ % 50)).$(($$ / 50 % 250)).
_netns_cleanup() {
	local rc=$?
	ip link del "$A" 2>/dev/null
	ip netns del "$NS" 2>/dev/null
	(exit "$rc")
	_cleanup
}
trap _netns_cleanup EXIT
ip netns add "$NS" 2>/dev/null || skip "cannot make a network namespace"
ip link add "$A" type veth peer name "$B" || skip "cannot make a veth pair"
ip link set "$B" netns "$NS"
ip addr add "${NET}1/24" dev "$A"
ip link set "$A" up
ip netns exec "$NS" ip addr add "${NET}2/24" dev "$B"
ip netns exec "$NS" ip link set "$B" up

add_export disk0 16M rw
write_config
sed -i "s|\"127.0.0.1:$PORT\"|\"127.0.0.1:$PORT\", \"${NET}1:$PORT\"|" "$CONF"
grep -q "${NET}1:$PORT" "$CONF" || fail "cannot set the listener in $CONF"
echo 'limits = { max_connections_per_client = 2; idle_timeout_s = 2; local_idle_timeout_s = 0; };' >>"$CONF"
start_wbd

Q=$((41000 + $$ % 9000))
setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c "
import socket, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', $Q))
s.listen(1)
time.sleep(30)" &
_PIDS+=("$!")
sleep 0.5

# The remote client: one connection from port Q, idle past the timeout;
# a second one served, a third refused.  A local client (Unix socket) idles as long.
"$PYTHON" - "$(uri_unix disk0)" "$NS" "${NET}1" "$PORT" "$Q" <<'PY' || fail "see above"
import nbd, subprocess, sys, time
uri, ns, host, port, q = sys.argv[1:6]
REMOTE = r'''
import socket, struct, sys, time
host, port, q = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def connect(src):
    s = socket.create_connection((host, port), source_address=src)
    s.settimeout(5)
    if len(s.recv(18)) < 18:
        return None
    s.sendall(struct.pack(">I", 3) +
              struct.pack(">QII", 0x49484156454F5054, 1, 5) + b"disk0")
    got = b""
    while len(got) < 10:
        d = s.recv(10 - len(got))
        if not d:
            return None
        got += d
    return s
first = connect(("0.0.0.0", q))
print("first", "served" if first else "refused", flush=True)
second = connect(None)
print("second", "served" if second else "refused", flush=True)
third = connect(None)
print("third", "served" if third else "refused", flush=True)
t = time.monotonic()
first.settimeout(10)
d = first.recv(1)
print("first closed after %.1f s" % (time.monotonic() - t) if not d
      else "first got data", flush=True)
'''
local = nbd.NBD()
local.connect_uri(uri)
out = subprocess.run(["ip", "netns", "exec", ns, "/usr/bin/python3", "-c",
                      REMOTE, host, port, q], capture_output=True, text=True,
                     timeout=60)
print(out.stdout + out.stderr, end="")
lines = out.stdout.splitlines()
if lines[:3] != ["first served", "second served", "third refused"]:
    sys.exit("FAIL: the remote client's connections: %r (expected the "
             "third refused by its address)" % lines[:3])
if len(lines) < 4 or not lines[3].startswith("first closed after"):
    sys.exit("FAIL: the remote client's idle connection: %r" % lines[3:])
secs = float(lines[3].split()[3])
if not 1 <= secs <= 5:
    sys.exit("FAIL: closed after %.1f s (idle_timeout_s = 2)" % secs)
local.pread(4096, 0)            # the local idle client stays
local.shutdown()
PY
grep -q "refused: client ${NET}2 already has 2 connections" "$LOG" ||
	fail "the refusal does not name the remote client's address"
grep -q 'no request for 2 s (limits.idle_timeout_s); closing' "$LOG" ||
	fail "the remote idle close was not logged as limits.idle_timeout_s"
grep -q 'uid 65534' "$LOG" && fail "a client was counted as uid 65534"
assert_alive
stop_wbd
check_logs_clean || exit 1
