#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The HTTP endpoint (metrics.listen): GET and HEAD /metrics answer 200 with
# the exposition's content type, any other path 404, another method 405;
# a client that sends nothing and one that never reads its answer do not
# keep others from being served; 1000 concurrent scrapes are all answered
# while a libnbd client's I/O goes on; and a scrape held up inside wbd
# (behind a reload stuck connecting to a remote that never answers, which
# holds the lock the status takes) holds up no NBD request: a libnbd
# client writes, reads and flushes meanwhile, and the scrape is answered,
# counting all of it, once the reload is let go.
source "${SRCDIR:-$(dirname "$0")}/lib-metrics.sh"
need_python_nbd
need_prometheus
need curl

add_export disk0 16M rw
write_config
# The storm below comes from one address: let it have every connection.
add_metrics_listen 'max_connections_per_client = 1024;'
add_remote_settings 'connect_timeout_ms = 120000;'
start_wbd

url=http://127.0.0.1:$MPORT
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
[[ $(code "$url/metrics") == 200 ]] || fail "GET /metrics did not answer 200"
ct=$(curl -s -o /dev/null -w '%{content_type}' "$url/metrics")
[[ $ct == "text/plain; version=0.0.4; charset=utf-8" ]] ||
	fail "GET /metrics: content type \"$ct\""
[[ $(code -I "$url/metrics") == 200 ]] || fail "HEAD /metrics did not answer 200"
for p in / /metric /metrics/ /metricsx /metrics/x; do
	c=$(code "$url$p")
	[[ $c == 404 ]] || fail "GET $p answered $c, not 404"
done
# A query string does not change the path.
[[ $(code "$url/metrics?name=x") == 200 ]] || fail "GET /metrics?name=x: not 200"
for m in POST PUT DELETE; do
	c=$(code -X "$m" "$url/metrics")
	[[ $c == 405 ]] || fail "$m /metrics answered $c, not 405"
done
grep -q "metrics: serving http://127.0.0.1:$MPORT/metrics" "$LOG" ||
	fail "wbd did not log the endpoint"
thread_names "$WBD_PID" | grep -qx wbd-metrics ||
	fail "no thread named wbd-metrics: $(thread_names "$WBD_PID" | sort -u)"

# A config with one more export, on a remote that accepts the connection
# and never says a word: a reload then holds daemon.tune_lock while it
# waits for the NBD greeting.
BH_PORT=$(free_port)
cp "$CONF" "$T/conf.late"
sed -i "s|^exports = (|exports = (\n  { name = \"late\"; backing = \"nbd://127.0.0.1:$BH_PORT/x\"; },|" "$T/conf.late"

"$PYTHON" - "$(uri_unix disk0)" "$MPORT" "$WBD_PID" "$CONF" "$T/conf.late" "$BH_PORT" <<'PY' || fail "see above"
import asyncio, nbd, os, signal, socket, sys, threading, time
sys.path.insert(0, os.environ["PYTHONPATH"].split(":")[0])
import metrics
from metrics import check_format, check_or_exit, http_get, samples, value

uri, port, pid, conf, late, bh_port = sys.argv[1:7]
port, pid, bh_port = int(port), int(pid), int(bh_port)
sent = {"read": 0, "write": 0, "flush": 0}

def io_ops(h, n, base):
    for k in range(n):
        buf = bytes([k % 251]) * 4096
        h.pwrite(buf, base + k * 4096)
        sent["write"] += 1
        if h.pread(4096, base + k * 4096) != buf:
            sys.exit("FAIL: read back wrong")
        sent["read"] += 1
        if k % 20 == 19:
            h.flush()
            sent["flush"] += 1

def check_counts(text, what):
    s = samples(text)
    for cmd, n in sent.items():
        got = value(s, "wbd_export_requests_total", export="disk0",
                    command=cmd)
        if got != n:
            sys.exit("FAIL: %s: %d %s requests counted, %d sent"
                     % (what, got, cmd, n))

h = nbd.NBD()
h.connect_uri(uri)

# --- clients that send nothing, or never read ------------------------------
idle = socket.create_connection(("127.0.0.1", port))
deaf = socket.socket()
deaf.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
deaf.connect(("127.0.0.1", port))
deaf.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 8)
st, hd, body = http_get(port)
if st != 200:
    sys.exit("FAIL: with an idle and a deaf client, GET /metrics answered %d" % st)
check_or_exit(check_format(body.decode()), "GET /metrics")
idle.close()
deaf.close()

# --- 1000 scrapes at once, a libnbd client's I/O meanwhile -------------------
progress = {"ops": 0}
storm_on = threading.Event()
storm_off = threading.Event()
seen = []
def io_during_storm():
    hh = nbd.NBD()
    hh.connect_uri(uri)
    k = 0
    while not storm_off.is_set() or k < 1:
        buf = os.urandom(4096)
        hh.pwrite(buf, 8 << 20 | (k % 256) * 4096)
        sent["write"] += 1
        progress["ops"] += 1
        if storm_on.is_set() and not seen:
            seen.append(progress["ops"])
        k += 1
    hh.flush()
    sent["flush"] += 1
    hh.shutdown()

async def scrape_once():
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    await w.drain()
    data = await asyncio.wait_for(r.read(), 300)
    w.close()
    head, _, body = data.partition(b"\r\n\r\n")
    ok = head.startswith(b"HTTP/1.1 200")
    length = [int(l.split(b":")[1]) for l in head.split(b"\r\n")
              if l.lower().startswith(b"content-length:")]
    return ok and length == [len(body)] and body.endswith(b"\n"), body

async def storm(n):
    storm_on.set()
    at_start = progress["ops"]
    res = await asyncio.gather(*[scrape_once() for _ in range(n)],
                               return_exceptions=True)
    during = progress["ops"] - at_start
    storm_off.set()
    return res, during

io = threading.Thread(target=io_during_storm)
io.start()
while progress["ops"] == 0:
    time.sleep(0.01)
t0 = time.monotonic()
res, during = asyncio.run(storm(1000))
io.join()
bad = [r for r in res if isinstance(r, BaseException) or not r[0]]
if bad:
    sys.exit("FAIL: %d of 1000 concurrent scrapes failed, e.g. %r"
             % (len(bad), bad[0] if isinstance(bad[0], BaseException)
                else bad[0][1][:200]))
check_or_exit(check_format(res[-1][1].decode()), "a scrape of the 1000")
print("1000 concurrent scrapes in %.1f s; the libnbd client made %d writes "
      "meanwhile" % (time.monotonic() - t0, during))
if during < 1:
    sys.exit("FAIL: no NBD request completed during the 1000 scrapes")
st, hd, body = http_get(port)
check_counts(body.decode(), "after the 1000 scrapes")

# --- a scrape held up inside wbd holds up no request -----------------------
bh = socket.socket()
bh.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
bh.bind(("127.0.0.1", bh_port))
bh.listen(8)
held = []
accepted = threading.Event()
release = threading.Event()
def black_hole():
    bh.settimeout(0.1)
    while not release.is_set():
        try:
            c, _ = bh.accept()
        except socket.timeout:
            continue
        held.append(c)          # never a word
        accepted.set()
    for c in held:
        c.close()
    bh.close()
threading.Thread(target=black_hole, daemon=True).start()

os.replace(late, conf)
os.kill(pid, signal.SIGHUP)
if not accepted.wait(60):
    sys.exit("FAIL: the reload never connected to the new remote")
scraped = {}
def slow_scrape():
    scraped["answer"] = http_get(port, timeout=300)
scraper = threading.Thread(target=slow_scrape)
scraper.start()
time.sleep(0.5)                 # the scrape reaches wbd and waits there
io_ops(h, 100, 0)               # writes, reads, flushes: all answered
# The reload holds the status's lock until the remote answers, which it
# never does before the release: a scrape answered by now was not held
# up, and the I/O above proved nothing.
if not scraper.is_alive():
    got = scraped.get("answer", ("no answer",))[0]
    sys.exit("FAIL: the scrape ended (%r) while the reload waited for the "
             "remote: it was not held up" % (got,))
print("100 writes, 100 reads, 5 flushes answered while a scrape waited")
release.set()
scraper.join(300)
if scraper.is_alive():
    sys.exit("FAIL: the scrape was not answered once the reload went on")
st, hd, body = scraped["answer"]
if st != 200:
    sys.exit("FAIL: the held scrape answered %d" % st)
check_or_exit(check_format(body.decode()), "the held scrape")
check_counts(body.decode(), "the held scrape")
h.shutdown()
PY
assert_alive
