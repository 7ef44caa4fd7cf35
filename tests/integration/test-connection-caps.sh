#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# What one connection may hold is a setting, shown in wbctl status, and
# logged when it bites: with limits.max_requests_per_connection = 4 a
# client that pipelines 200 READs and reads no reply is not read past
# the 4 it holds; with max_inflight_bytes_per_connection = 1M one that
# pipelines 2 MiB READs is not read past the first.  That is
# back-pressure, not an error: once they read, every reply comes, whole
# and successful.  Each pause is counted (limits.connection_pauses) and
# logged (once in 10 s for each limit).  limits.handshake_timeout_s = 1
# closes a client that never finishes its handshake after about a second,
# counted (limits.handshake_timeouts) and logged.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

add_export disk0 64M rw
write_config
cat >>"$CONF" <<'EOF'
limits = {
  max_requests_per_connection = 4;
  max_inflight_bytes_per_connection = "1M";
  handshake_timeout_s = 1;
  stall_timeout_s = 0;
};
EOF
start_wbd
ctl() { "$WBCTL" -s "${SOCK%/*}/control.sock" "$@"; }
status_limits() {
	ctl status --json | "$PYTHON" -c 'import json, sys
l = json.load(sys.stdin)["limits"]
print(l["max_requests_per_connection"], l["max_inflight_bytes_per_connection"],
      l["handshake_timeout_s"], l["connection_pauses"], l["handshake_timeouts"],
      l["inflight_bytes"])'
}
read -r reqs bytes hs pauses timeouts used <<<"$(status_limits)"
[[ "$reqs $bytes $hs $pauses $timeouts" == "4 1048576 1 0 0" ]] ||
	fail "status limits: $reqs $bytes $hs $pauses $timeouts"
ctl status | tr -s ' \n' ' ' | grep -Eq 'per connection +4 requests \(max_requests_per_connection\), 1(\.0)? ?Mi?B? \(max_inflight_bytes_per_connection\), 0 pause' ||
	fail "wbctl status has no 'per connection' line: $(ctl status | grep -i 'per conn')"

"$PYTHON" - "$PORT" "$SRCDIR" "${SOCK%/*}/control.sock" "$WBCTL" <<'PY' || fail "see above"
import json, socket, subprocess, sys, time, types
port, srcdir, ctlsock, wbctl = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
sys.path.insert(0, srcdir)
import nbdraw

def pauses():
    out = subprocess.run([wbctl, "-s", ctlsock, "status", "--json"],
                         check=True, capture_output=True).stdout
    return json.loads(out)["limits"]["connection_pauses"]

def connect():
    r = nbdraw.Raw(types.SimpleNamespace(tcp=port), tcp=True)
    r.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    r.open("disk0")
    return r

def pipeline_then_read(r, n, size, what):
    before = pauses()
    for i in range(n):
        r.request(nbdraw.CMD_READ, i * size, size, handle=i + 1)
    # Nothing read: the replies fill the socket, the requests stay in
    # flight and the connection stops at its limit.
    deadline = time.monotonic() + 10
    while pauses() == before:
        if time.monotonic() > deadline:
            sys.exit("FAIL: %s: no pause counted" % what)
        time.sleep(0.1)
    r.s.settimeout(20)
    seen = set()
    for _ in range(n):
        handle, err, data = r.reply(size)
        if err != 0:
            sys.exit("FAIL: %s: a reply with error %d" % (what, err))
        seen.add(handle)
    if seen != set(range(1, n + 1)):
        sys.exit("FAIL: %s: %d distinct replies of %d" % (what, len(seen), n))
    print("%s: paused at its limit, then all %d replies (%d bytes each)" %
          (what, n, size))

# The request limit: 64 KiB READs (4 of them hold 256 KiB, under 1M).
a = connect()
pipeline_then_read(a, 200, 64 << 10, "max_requests_per_connection")
# The byte limit: 2 MiB READs, each over 1M alone.
b = connect()
pipeline_then_read(b, 24, 2 << 20, "max_inflight_bytes_per_connection")
a.close()
b.close()

# A client that connects and says nothing is closed after about 1 s.
s = socket.create_connection(("127.0.0.1", port))
start = time.monotonic()
s.settimeout(10)
got = b""
try:
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        got += chunk
except ConnectionResetError:
    pass
took = time.monotonic() - start
s.close()
if not 0.5 <= took <= 5:
    sys.exit("FAIL: the silent client was closed after %.1f s, not about 1 s" % took)
print("a silent client was closed after %.1f s" % took)
PY
read -r reqs bytes hs pauses timeouts used <<<"$(status_limits)"
((pauses >= 2)) || fail "limits.connection_pauses is $pauses, expected 2 or more"
((timeouts == 1)) || fail "limits.handshake_timeouts is $timeouts, expected 1"
grep -Eq ': 4 requests in flight \(limits.max_requests_per_connection = 4\): reading no more requests' "$LOG" ||
	fail "no log line for the request limit"
grep -Eq ': 2097152 bytes in flight \(limits.max_inflight_bytes_per_connection = 1048576\): reading no more requests' "$LOG" ||
	fail "no log line for the byte limit"
grep -Eq 'handshake not finished within 1 s \(limits.handshake_timeout_s\)' "$LOG" ||
	fail "no log line for the handshake timeout"
log "$pauses pause(s) at the per-connection limits, every reply whole; a silent client closed after the 1 s handshake timeout"
assert_alive
stop_wbd
