#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The HTTP endpoint's limits are settings, shown in wbctl status: with
# metrics.max_connections_per_client = 2, a client (127.0.0.1) holding two
# idle connections has a third closed at once, counted (metrics.refused)
# and logged, while a scrape from another address (127.0.0.2) is answered;
# once the two close, 127.0.0.1 is served again.
source "${SRCDIR:-$(dirname "$0")}/lib-metrics.sh"

add_export disk0 16M rw
write_config
add_metrics_listen 'max_connections = 8; max_connections_per_client = 2; timeout_s = 30;'
start_wbd
status_metrics() {
	wbctl status --json | "$MPY" -c 'import json, sys
m = json.load(sys.stdin)["metrics"]
print(m["max_connections"], m["max_connections_per_client"], m["timeout_s"], m["connections"], m["refused"])'
}
read -r max per tmo conns refused <<<"$(status_metrics)"
[[ "$max $per $tmo $refused" == "8 2 30 0" ]] || fail "status metrics: $max $per $tmo $refused"
wbctl status | grep -Eq 'metrics +http://127.0.0.1:[0-9]+/metrics: 0 of 8 connections' ||
	fail "wbctl status has no metrics line"

"$MPY" - "$MPORT" "$WBCTL" "$CONF" <<'PY' || fail "see above"
import json, socket, subprocess, sys, time
port = int(sys.argv[1])

def get(src):
    s = socket.socket()
    s.settimeout(10)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except ConnectionResetError:
        pass
    s.close()
    return data

held = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
time.sleep(0.3)
if get("127.0.0.1"):
    sys.exit("FAIL: a third connection from 127.0.0.1 was served")
if not get("127.0.0.2").startswith(b"HTTP/1.1 200"):
    sys.exit("FAIL: a scrape from 127.0.0.2 was not answered")
for s in held:
    s.close()
time.sleep(0.3)
if not get("127.0.0.1").startswith(b"HTTP/1.1 200"):
    sys.exit("FAIL: 127.0.0.1 not served again once its connections closed")
print("a third connection of one client refused; another address served")
PY
read -r max per tmo conns refused <<<"$(status_metrics)"
((refused == 1)) || fail "metrics.refused is $refused, expected 1"
grep -q 'metrics: refused a client at 127.0.0.1: it has 2 connections (metrics.max_connections_per_client)' "$LOG" ||
	fail "the refusal was not logged"
assert_alive
stop_wbd
