#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Allow lists over TCP: an address or network (IPv4 and IPv6) admits the
# clients it covers and refuses the others, checked with clients bound to
# 127.0.0.1, 127.0.0.2 and ::1.  A refusal is NBD_REP_ERR_POLICY on INFO
# and GO (the client may go on and open another export), a close without
# a reply on EXPORT_NAME, and one log line per connection; LIST shows a
# client only the exports it may open.  300 refused connections in a row
# leave at most 10 lines on each I/O thread in 10 s.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd
python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0))' \
	2>/dev/null || skip "no IPv6 loopback"

PORT=$(free_port)
for n in one two net v6 none; do
	truncate -s 4M "$T/$n.img"
done
cat >"$CONF" <<EOF
listen = { tcp = [ "127.0.0.1:$PORT", "[::1]:$PORT" ]; unix = [ "$SOCK" ]; };
cache = { size = "16M"; };
control = { socket = "$T/control.sock"; };
exports = (
  { name = "one"; backing = "$T/one.img"; allow = [ "127.0.0.1" ]; },
  { name = "two"; backing = "$T/two.img"; allow = [ "127.0.0.2/32", "fd00::/8" ]; },
  { name = "net"; backing = "$T/net.img"; allow = [ "127.0.0.0/30" ]; },
  { name = "v6"; backing = "$T/v6.img"; allow = [ "::1" ]; },
  { name = "none"; backing = "$T/none.img"; allow = [ "uid:0" ]; }
);
EOF
start_wbd

"$PYTHON" - "$SRCDIR" "$PORT" "$SOCK" >"$T/py.out" 2>&1 <<'EOF' || { cat "$T/py.out"; fail "see above"; }
import socket, struct, sys
sys.path.insert(0, sys.argv[1])
import nbd
from nbdraw import (Raw, CaseFailed, OPT_GO, OPT_INFO, OPT_LIST,
                    OPT_EXPORT_NAME, REP_ACK, REP_SERVER, REP_ERR, repname)

port, sock = int(sys.argv[2]), sys.argv[3]
ERR_POLICY = REP_ERR | 2

def tcp(src, family=socket.AF_INET):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(20)
    s.bind((src, 0))
    s.connect((src if family == socket.AF_INET6 else "127.0.0.1", port))
    return s

def raw(s):
    r = Raw.__new__(Raw)
    r.s, r.structured = s, False
    r.greeting()
    return r

def opens(src, name, family=socket.AF_INET):
    """libnbd over a socket bound to SRC: can it open NAME and read?"""
    h = nbd.NBD()
    h.set_export_name(name)
    try:
        h.connect_socket(tcp(src, family).detach())
        h.pread(512, 0)
        h.shutdown()
        return True
    except nbd.Error as e:
        print("  (%s -> %s: %s)" % (src, name, e))
        return False

def check(cond, what):
    if not cond:
        raise CaseFailed(what)
    print("ok  ", what)

check(opens("127.0.0.2", "two"), "127.0.0.2 opens two (127.0.0.2/32)")
check(not opens("127.0.0.1", "two"), "127.0.0.1 is refused two")
check(opens("127.0.0.1", "one"), "127.0.0.1 opens one (a bare address)")
check(not opens("127.0.0.2", "one"), "127.0.0.2 is refused one")
check(opens("127.0.0.2", "net") and opens("127.0.0.1", "net"),
      "127.0.0.0/30 covers .1 and .2")
check(not opens("127.0.0.5", "net"), "127.0.0.5 is outside 127.0.0.0/30")
check(opens("::1", "v6", socket.AF_INET6), "::1 opens v6")
check(not opens("127.0.0.1", "v6"), "127.0.0.1 is refused v6 (::1 only)")
check(not opens("::1", "two", socket.AF_INET6), "::1 is outside fd00::/8")
check(not opens("127.0.0.1", "none"), "a uid entry admits no TCP client")

# The wire: ERR_POLICY on INFO and GO, and the client may go on.
s = tcp("127.0.0.1")
print("policy connection from port", s.getsockname()[1])
r = raw(s)
rtype, _ = r.go("two", OPT_INFO)
check(rtype == ERR_POLICY, "INFO two: %s" % repname(rtype))
rtype, _ = r.go("two", OPT_GO)
check(rtype == ERR_POLICY, "GO two: %s" % repname(rtype))
rtype, _ = r.go("one", OPT_GO)
check(rtype == REP_ACK, "then GO one: %s" % repname(rtype))
r.read_ok(0, 4096)
r.close()

# EXPORT_NAME has no error reply: the server closes.
r = raw(tcp("127.0.0.1"))
r.send_option(OPT_EXPORT_NAME, b"two")
r.expect_eof("EXPORT_NAME two from 127.0.0.1")
print("ok   EXPORT_NAME two from 127.0.0.1: closed without a reply")

# LIST: only what this client may open, in order.
def listed(s):
    r = raw(s)
    r.send_option(OPT_LIST)
    names = []
    for rtype, data in r.option_replies(OPT_LIST):
        if rtype == REP_SERVER:
            (n,) = struct.unpack(">I", data[:4])
            names.append(data[4:4 + n].decode())
    r.close()
    return names

got = listed(tcp("127.0.0.2"))
check(got == ["two", "net"], "LIST from 127.0.0.2: %s" % got)
got = listed(tcp("127.0.0.1"))
check(got == ["one", "net"], "LIST from 127.0.0.1: %s" % got)
got = listed(tcp("::1", socket.AF_INET6))
check(got == ["v6"], "LIST from ::1: %s" % got)
u = socket.socket(socket.AF_UNIX)
u.settimeout(20)
u.connect(sock)
got = listed(u)
check(got == ["none"], "LIST over the Unix socket (as root): %s" % got)
EOF
cat "$T/py.out" >&2

# One log line for the connection refused twice, naming who and why.
pport=$(sed -n 's/^policy connection from port //p' "$T/py.out")
n=$(grep -c "127.0.0.1:$pport: export \"two\" refused: 127.0.0.1 matches none of the 2 entries" "$LOG" || true)
[[ $n == 1 ]] || fail "expected one refusal line for 127.0.0.1:$pport, got $n"
grep -q 'export "v6" refused: 127.0.0.1 matches none' "$LOG" ||
	fail "no refusal logged for 127.0.0.1 -> v6"
grep -q 'export "two" refused: \[::1\] matches none' "$LOG" ||
	fail "no refusal logged for ::1 -> two"

before=$(grep -c 'export "two" refused' "$LOG")
"$PYTHON" - "$SRCDIR" "$PORT" <<'PY' || fail "see above"
import socket, sys
sys.path.insert(0, sys.argv[1])
from nbdraw import Raw, OPT_EXPORT_NAME
for _ in range(300):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=20)
    r = Raw.__new__(Raw)
    r.s, r.structured = s, False
    r.greeting()
    r.send_option(OPT_EXPORT_NAME, b"two")
    r.expect_eof("EXPORT_NAME of a refused export")
    s.close()
PY
lines=$(($(grep -c 'export "two" refused' "$LOG") - before))
threads=$(getconf _NPROCESSORS_ONLN)
((lines >= 1 && lines <= 10 * threads)) ||
	fail "$lines log lines for 300 refused connections (at most 10 a thread in 10 s, $threads threads)"
log "300 refused connections: $lines log lines"
assert_alive
