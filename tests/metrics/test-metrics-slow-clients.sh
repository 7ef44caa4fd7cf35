#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Clients that never finish a request cannot keep Prometheus out of the
# metrics endpoint (max_connections = 8, 2 per client, timeout_s = 3):
#
# - 8 connections from 4 addresses each drip one byte of a request every
#   0.5 s, so that no byte-by-byte idle timeout ever fires, and take every
#   connection; a scraper from a fifth address scrapes every 0.5 s all the
#   while: every scrape is answered within 2 s (the new client closes the
#   connection waiting longest for a request).  Each drip-fed connection is
#   closed within timeout_s of its start and a few seconds of slack, however
#   many bytes it sent.
# - 64 connections from 16 addresses send half a request and close: a
#   scrape right after is answered within 2 s.
# - The closing is logged (rate-limited) and counted (wbctl status:
#   metrics.closed).
source "${SRCDIR:-$(dirname "$0")}/lib-metrics.sh"

add_export disk0 16M rw
write_config
add_metrics_listen 'max_connections = 8; max_connections_per_client = 2; timeout_s = 3;'
start_wbd

"$MPY" - "$MPORT" <<'PY' || fail "see above"
import select, socket, sys, time
port = int(sys.argv[1])
REQ = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"

def scrape(src):
    """Seconds until a whole 200 answer came, or None."""
    t0 = time.monotonic()
    s = socket.socket()
    s.settimeout(5)
    s.bind((src, 0))
    try:
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError as e:
        print("scrape from %s: %s" % (src, e), file=sys.stderr)
        return None
    finally:
        s.close()
    if not data.startswith(b"HTTP/1.1 200") or b"wbd_" not in data:
        print("scrape from %s: %r" % (src, data[:80]), file=sys.stderr)
        return None
    return time.monotonic() - t0

# Drip-feeders: every 0.5 s one more byte of a request that never ends.
drip = []
for a in range(4):
    for _ in range(2):
        s = socket.socket()
        s.bind(("127.0.0.%d" % (10 + a), 0))
        s.connect(("127.0.0.1", port))
        s.setblocking(False)
        drip.append({"s": s, "t0": time.monotonic(), "sent": 0, "closed": None})
worst = 0.0
scrapes = 0
end = time.monotonic() + 10
next_scrape = time.monotonic() + 0.5
while time.monotonic() < end:
    for d in drip:
        if d["closed"] is not None:
            continue
        try:
            r, _, _ = select.select([d["s"]], [], [], 0)
            if r and d["s"].recv(4096) == b"":
                raise ConnectionResetError()
            d["s"].send(REQ[d["sent"] % 16:d["sent"] % 16 + 1])
            d["sent"] += 1
        except (BrokenPipeError, ConnectionResetError, OSError):
            d["closed"] = time.monotonic() - d["t0"]
    if time.monotonic() >= next_scrape:
        took = scrape("127.0.0.50")
        if took is None or took > 2.0:
            sys.exit("FAIL: a scrape among drip-feeders was %s" %
                     ("not answered" if took is None else "answered in %.2f s" % took))
        worst = max(worst, took)
        scrapes += 1
        next_scrape = time.monotonic() + 0.5
    time.sleep(0.5)
for d in drip:
    if d["closed"] is None:
        sys.exit("FAIL: a drip-fed connection is still open after 10 s "
                 "(%d bytes sent)" % d["sent"])
    if d["closed"] > 3 + 4:
        sys.exit("FAIL: a drip-fed connection was closed after %.1f s, "
                 "timeout_s is 3" % d["closed"])
print("%d scrapes among 8 drip-fed connections, the slowest %.3f s; the "
      "drip-fed closed after %s s" % (scrapes, worst,
      sorted(round(d["closed"], 1) for d in drip)), file=sys.stderr)

# Half-sent requests, then closed.
for i in range(64):
    s = socket.socket()
    s.bind(("127.0.1.%d" % (1 + i % 16), 0))
    s.connect(("127.0.0.1", port))
    s.send(b"GET /metr")
    s.close()
took = scrape("127.0.0.51")
if took is None or took > 2.0:
    sys.exit("FAIL: a scrape after 64 half-sent requests was %s" %
             ("not answered" if took is None else "answered in %.2f s" % took))
print("a scrape after 64 half-sent requests: %.3f s" % took, file=sys.stderr)
PY
grep -q 'metrics: closed a connection of 127.0.0.1[0-3]' "$LOG" ||
	fail "the closing of drip-fed connections was not logged"
closed=$(wbctl status --json | "$MPY" -c 'import json, sys; print(json.load(sys.stdin)["metrics"]["closed"])')
((closed >= 8)) || fail "wbctl status: metrics.closed is $closed, expected 8 or more"
wbctl status | tr -s ' \n' '  ' | grep -Eq "metrics .* [0-9]+ refused, $closed closed" ||
	fail "wbctl status does not show the connections closed"
assert_alive
stop_wbd
