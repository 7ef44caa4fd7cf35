#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# limits.handshake_timeout_s is a deadline for the whole handshake, not
# for each byte: a client that drip-feeds its handshake (one byte every
# 0.3 s, never finishing) is closed once handshake_timeout_s (2 s here)
# has passed since it connected, counted and logged, while a client that
# connects meanwhile is served.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

add_export disk0 16M rw
write_config
echo 'limits = { handshake_timeout_s = 2; };' >>"$CONF"
start_wbd

"$PYTHON" - "$PORT" "$(uri_tcp disk0)" <<'PY' || fail "see above"
import nbd, socket, struct, sys, time
port, uri = int(sys.argv[1]), sys.argv[2]
s = socket.create_connection(("127.0.0.1", port))
t0 = time.monotonic()
greeting = s.recv(18)
# Client flags, then NBD_OPT_LIST with a 64-byte payload: 84 bytes that
# would take 25 s at this pace.
data = struct.pack(">I", 3) + struct.pack(">QII", 0x49484156454F5054, 3, 64) \
    + b"x" * 64
s.settimeout(0.3)
sent = 0
closed = None
for b in data:
    try:
        s.send(bytes([b]))
        sent += 1
    except OSError:
        closed = time.monotonic() - t0
        break
    try:
        if s.recv(4096) == b"":
            closed = time.monotonic() - t0
            break
    except socket.timeout:
        pass
    except OSError:
        closed = time.monotonic() - t0
        break
    if sent == 3:               # meanwhile another client is served
        h = nbd.NBD()
        h.connect_uri(uri)
        h.pwrite(b"\x5a" * 4096, 0)
        if h.pread(4096, 0) != b"\x5a" * 4096:
            sys.exit("FAIL: data read back wrong")
        h.shutdown()
if closed is None:
    sys.exit("FAIL: a client drip-feeding its handshake was never closed "
             "(%d bytes sent over %.1f s)" % (sent, time.monotonic() - t0))
if not 1.5 <= closed <= 4:
    sys.exit("FAIL: the drip-feeding client was closed after %.1f s "
             "(handshake_timeout_s = 2)" % closed)
print("drip-feeding client closed after %.1f s, %d bytes sent" % (closed, sent))
PY
n=$("$WBCTL" -s "$T/control.sock" status --json | "$PYTHON" -c 'import json, sys
print(json.load(sys.stdin)["limits"]["handshake_timeouts"])')
((n == 1)) || fail "limits.handshake_timeouts is $n, expected 1"
grep -q 'handshake not finished within 2 s (limits.handshake_timeout_s)' "$LOG" ||
	fail "the handshake timeout was not logged"
assert_alive
stop_wbd
check_logs_clean || exit 1
