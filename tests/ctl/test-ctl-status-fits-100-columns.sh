#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Every line of "wbctl status" fits in 100 columns, and nothing is lost
# for it: a long value goes on continuation lines, a table too wide
# changes shape.  First a real daemon with several exports -- read-only,
# writethrough-until-flush, with an allow list, one on a remote nbdkit,
# one waiting for a remote that is not there -- the metrics endpoint and
# dirty data; then a stand-in daemon that gives the same answer again
# (so that every value, not only those that do not change, can be checked
# against the JSON), and then one with the largest numbers the protocol
# carries, long names, long lists and long URIs.  Each time what the text
# shows is checked against the JSON answer (whitespace aside, as a line
# may break anywhere in a long word).
source "${SRCDIR:-$(dirname "$0")}/lib-ctl.sh"
need_python_nbd

# check_status TEXT JSON [live]: TEXT, wbctl status's output, has no line
# wider than 100 columns and shows what JSON, the --json answer, holds; but
# for "live", two answers of a running daemon, only what does not change
# from one to the next.
check_status() {
	"$SYSPY" - "$1" "$2" "${3:-}" <<'PY' || fail "wbctl status: see above"
import json, re, sys
text = open(sys.argv[1], encoding="utf-8").read()
s = json.load(open(sys.argv[2]))
live = sys.argv[3] == "live"
bad = [l for l in text.splitlines() if len(l) > 100]
for l in bad:
    print("%d columns: %s" % (len(l), l))
if bad:
    sys.exit("FAIL: %d line(s) wider than 100 columns" % len(bad))

def human(n):
    names = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    v, i = float(n), 0
    while v >= 1024 and i < 6:
        v, i = v / 1024, i + 1
    if 0 < i < 6 and v >= 1023.95:
        v, i = v / 1024, i + 1
    return "%d B" % n if i == 0 else "%.1f %s" % (v, names[i])

flat = re.sub(r"\s+", "", text)
missing = []
def shows(what, v, changes=False):
    if changes and live:
        return
    if re.sub(r"\s+", "", str(v)) not in flat:
        missing.append("%s: %r" % (what, v))

shows("pid", "pid %d" % s["pid"])
c = s["cache"]
shows("cache.size_bytes", human(c["size_bytes"]))
for k in ("used_bytes", "dirty_bytes", "writeback_bytes"):
    shows("cache." + k, human(c[k]), True)
for k in ("hits", "misses", "evictions"):
    shows("cache." + k, "%s %d" % (k, c[k]), True)
shows("cache.readahead_hits", "%d read-ahead hits" % c["readahead_hits"], True)
for label in ("dirty_background", "dirty", "dirty_expire", "dirty_writeback",
              "connections", "in flight", "per connection", "running as",
              "control socket", "flush latency", "pacing"):
    if not re.search(r"^  %s +\S" % label, text, re.M):
        missing.append("the line %r" % label)
lim = s["limits"]
shows("max_connections", "%d (max_connections)" % lim["max_connections"])
shows("max_connections_per_client", "%d per client (max_connections_per_client"
      % lim["max_connections_per_client"])
shows("max_inflight_bytes", "%s (max_inflight_bytes)" % human(lim["max_inflight_bytes"]))
shows("max_requests_per_connection", "%d requests (max_requests_per_connection)"
      % lim["max_requests_per_connection"])
shows("max_inflight_bytes_per_connection", "%s (max_inflight_bytes_per_connection)"
      % human(lim["max_inflight_bytes_per_connection"]))
shows("max_cache_requests", "CACHE %d at once a device (max_cache_requests)"
      % lim["max_cache_requests"])
shows("control.max_clients", "of %d clients (max_clients)" % s["control"]["max_clients"])
if s.get("metrics", {}).get("listen"):
    shows("metrics", "http://%s/metrics" % s["metrics"]["listen"])
shows("run_as", "uid %d, gid %d" % (s["run_as"]["uid"], s["run_as"]["gid"]))
for e in s["exports"]:
    for v in (e["name"], human(e["size_bytes"]), e["cache_mode"], e["device"]):
        shows("export " + e["name"], v)
    for v in (human(e["cached_bytes"]), human(e["dirty_bytes"])):
        shows("export " + e["name"], v, True)
    for a in e["access"]["allow"] or []:
        shows("export %s allow" % e["name"], a)
for w in s["waiting_exports"]:
    # (Its attempts go on between the two answers.)
    shows("waiting " + w["name"], "%s: WAITING for its remote %s ("
          % (w["name"], w["backing"]))
    shows("waiting " + w["name"], "failed attempt(s) since")
for d in s["devices"]:
    dev = d["device"]
    if not re.search(r"^  %s( |$)" % re.escape(dev), text, re.M):
        missing.append("a line for device %s" % dev)
    shows("device %s exports" % dev, "%s: exports %s;" % (dev, ", ".join(d["exports"])))
    for k in ("dirty_bytes", "writeback_bytes", "written_bytes"):
        shows("device %s %s" % (dev, k), human(d[k]), True)
    shows("device %s bandwidth" % dev, human(d["bandwidth_bytes_per_s"]) + "/s", True)
    wk = d["workers"]
    shows("device %s workers" % dev, "%d/%d (%d..%d)" % (wk["busy"], wk["threads"], wk["min"], wk["max"]), True)
    shows("device %s ratio" % dev, "ratio %d..%d%%" % (d["min_ratio"], d["max_ratio"]))
    shows("device %s CPU" % dev, "%s: writeback CPU %.2f s" % (dev, d["writeback_cpu_seconds"]), True)
    shows("device %s CPU" % dev, "%s: writeback CPU" % dev)
    if d["io_engine"]:
        shows("device %s io_engine" % dev, "io_engine " + d["io_engine"])
    if d["last_error"]:
        shows("device %s last error" % dev, "last error: " + d["last_error"])
    r = d["remote"]
    if r:
        shows("device %s remote" % dev, "%s: %s, %s since" % (dev, d["backing"],
              "connected" if r["connected"] else "DISCONNECTED"))
        shows("device %s remote" % dev, "%d connection(s)" % r["connections"], True)
        if r["multi_conn"]:
            shows("device %s remote conn_depth" % dev,
                  "another past %d command(s) on each" % r["conn_depth"])
        shows("device %s remote" % dev, "failed reconnect(s)")
        if r["last_error"]:
            shows("device %s remote error" % dev, "last: " + r["last_error"])
if missing:
    print(text)
    sys.exit("FAIL: wbctl status does not show:\n  " + "\n  ".join(missing))
print("%d lines, at most %d columns" % (len(text.splitlines()),
      max(len(l) for l in text.splitlines())))
PY
}

# A real daemon.
add_export disk0 16M rw "first disk"
add_export iso 8M ro
add_export_mode a-rather-long-export-name-for-a-test 8M writethrough-until-flush
add_export_allow guarded 8M 127.0.0.2 127.0.0.3 uid:1000 group:disk
if command -v nbdkit >/dev/null; then
	KIT=$T/kit.sock
	nbdkit -f -U "$KIT" memory 32M >>"$T/nbdkit.log" 2>&1 &
	_PIDS+=("$!")
	for ((i = 0; i < 100; i++)); do [[ -S $KIT ]] && break; sleep 0.1; done
	[[ -S $KIT ]] || fail "nbdkit made no socket: $(cat "$T/nbdkit.log")"
	_EXPORTS+=("  { name = \"remote\"; backing = \"nbd+unix:///?socket=$KIT\"; }")
	_EXPORTS+=("  { name = \"late\"; backing = \"nbd+unix:///?socket=$T/absent.sock\"; }")
else
	log "nbdkit is not installed: no remote export"
fi
MPORT=$(free_port)
CONF_EXTRA="metrics = { listen = \"127.0.0.1:$MPORT\"; };"
write_cache_config 64M 'dirty_background_bytes = "32M"; dirty_bytes = "48M"; dirty_writeback_centisecs = 0;'
start_wbd
"$PYTHON" - "$(uri_unix disk0)" <<'PY' || fail "could not write through libnbd"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(b"\x5a" * (4 << 20), 0)
h.shutdown()
PY
if [[ -n ${KIT:-} ]]; then
	"$PYTHON" - "$(uri_unix remote)" <<'PY' || fail "could not write to the remote export"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(b"\xa5" * (1 << 20), 0)
h.flush()
h.shutdown()
PY
fi
expect_exit 0 wbctl status
printf '%s\n' "$OUT" >"$T/status.txt"
expect_exit 0 wbctl --json status
printf '%s\n' "$OUT" >"$T/status.json"
check_status "$T/status.txt" "$T/status.json" live
log "a real daemon: $(awk '{ if (length($0) > m) m = length($0) } END { print m }' "$T/status.txt") columns at most"

# A stand-in daemon on FAKE answers every request with the JSON in
# $T/answer.json (read for each): the real answer above, then the largest.
FAKE=$T/fake.sock
"$SYSPY" - "$FAKE" "$T/answer.json" <<'PY' &
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(8)
while True:
    c, _ = s.accept()
    for line in c.makefile("rb"):
        answer = json.dumps(json.load(open(sys.argv[2])))
        c.sendall(answer.encode() + b"\n")
    c.close()
PY
_PIDS+=("$!")
for ((i = 0; i < 100; i++)); do [[ -S $FAKE ]] && break; sleep 0.1; done
[[ -S $FAKE ]] || fail "the stand-in daemon made no socket"

# The real answer, every value checked.
cp "$T/status.json" "$T/answer.json"
expect_exit 0 "$WBCTL" -s "$FAKE" status
printf '%s\n' "$OUT" >"$T/replay.txt"
check_status "$T/replay.txt" "$T/answer.json"

# The largest numbers (2^63 - 1, as the daemon's JSON integers are
# signed), names and lists: the example answer of docs/control-protocol.md,
# blown up.
"$SYSPY" - "$SRCDIR/../../docs/control-protocol.md" "$T/answer.json" <<'PY' || fail "could not make the answer"
import json, sys
md = open(sys.argv[1]).read()
i = md.index('```json\n{"ok": true, "v": 1,\n "daemon_version"') + len("```json\n")
s = json.loads(md[i:md.index("```", i)])
BIG = 2**63 - 1
def big(o):
    if isinstance(o, dict):
        return {k: big(v) for k, v in o.items()}
    if isinstance(o, list):
        return [big(x) for x in o]
    if isinstance(o, int) and not isinstance(o, bool):
        return BIG
    return o
s = big(s)
s["cache"]["page_size"] = 1 << 20
s["thresholds"]["dirty_background_ratio"] = 100
s["limits"]["client_ipv6_prefix"] = 128
one = s["exports"][0]
exports = []
for k in range(12):
    e = dict(one, name="export-number-%02d-with-a-long-name" % k if k % 3 else "d%d" % k,
             cache_mode="writethrough-until-flush", readonly=bool(k % 2))
    e["access"] = {"allow": ["10.1.%d.0/24" % n for n in range(20)] + ["uid:1000", "group:disk"],
                   "tls_required": True}
    exports.append(e)
exports.append(dict(one, name="x" * 150))
s["exports"] = exports
d = s["devices"][0]
d.update(device="4095:1048575", exports=[e["name"] for e in exports],
         last_error="Input/output error, " * 8 + "and more",
         writeback_cpu_seconds=123456.789, writeback_cpu_share=12.5)
d["queued"] = {"total": BIG, "background": True, "periodic": True,
               "flush": BIG, "fua": BIG, "sync": BIG, "read": BIG}
r = dict(d, device="43:12",
         backing="nbd+unix:///" + "disk" * 10 + "?socket=/run/a/very/long/path/to/the/remote/server/socket/file.sock",
         io_engine="")
r["remote"] = {"connected": False, "since_unix_ms": 1764900000000,
               "retries": BIG, "reconnects": BIG, "failed_reconnects": BIG,
               "connections": BIG, "multi_conn": True, "conn_depth": BIG,
               "last_error": "Connection refused " * 5 + "again",
               "read_connection": True, "read_connection_failures": BIG,
               "write_connection": True, "write_connection_failures": BIG,
               "all_connections": BIG, "max_connections": BIG,
               "connections_held_back": BIG, "connect_timeout_ms": BIG,
               "reconnect_max_ms": BIG, "io_timeout_ms": BIG,
               "flush_before_read": True, "unflushed_ranges": BIG,
               "unflushed_ranges_max": BIG, "unflushed_overflows": BIG,
               "flushes_before_read": BIG, "commit_interval_ms": BIG,
               "commits": BIG, "rewritten_after_loss_bytes": BIG}
d["workers"] = dict(d.get("workers", {}), waits_at_max=BIG)
s["devices"] = [d, r]
s["waiting_exports"] = [
    {"name": "late", "backing": "nbd+unix:///?socket=/tmp/wbd-it.AbCdEf/late.sock",
     "attempts": 7, "since_unix_ms": 1764900000000},
    {"name": "w" * 120, "backing": "nbds://" + "h" * 150 + "/x", "attempts": BIG,
     "since_unix_ms": 1764900000000}]
s["tls"]["credentials"] = "/etc/wbd/tls/" + "c" * 120
s["run_as"] = {"uid": BIG, "gid": BIG, "user": "u" * 60, "group": "g" * 60}
s["io_threads"] = {"configured": BIG, "running": BIG}
s["metrics"]["listen"] = "[fd00:1234:5678:9abc:def0:1234:5678:9abc]:65535"
json.dump(s, open(sys.argv[2], "w"))
PY
expect_exit 0 "$WBCTL" -s "$FAKE" status
printf '%s\n' "$OUT" >"$T/largest.txt"
check_status "$T/largest.txt" "$T/answer.json"
assert_alive
