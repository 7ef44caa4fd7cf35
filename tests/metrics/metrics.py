# SPDX-License-Identifier: GPL-2.0-or-later
"""metrics.py - what the metrics tests share: scraping wbd (through its
control socket, as "wbctl metrics" does, or over HTTP), reading the
exposition with Prometheus's own parser (python3-prometheus-client), and
the checks every exposition must pass.  Imported by the test scripts
(sys.path gets this directory)."""
import json
import socket
import sys

from prometheus_client.parser import text_string_to_metric_families


def scrape_ctl(path):
    """The exposition, asked of the control socket at PATH."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(60)
    s.connect(path)
    s.sendall(b'{"v": 1, "cmd": "metrics"}\n')
    f = s.makefile("rb")
    answer = json.loads(f.readline())
    s.close()
    if not answer.get("ok"):
        raise RuntimeError("metrics: %r" % answer)
    return answer["text"]


def http_get(port, path="/metrics", method="GET", timeout=60):
    """(status, headers dict, body) of one HTTP/1.1 request."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(("%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close"
               "\r\n\r\n" % (method, path)).encode())
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers, body


def families(text):
    """The families of TEXT, by name (the parser raises on bad syntax)."""
    return {f.name: f for f in text_string_to_metric_families(text)}


def samples(text):
    """{(sample name, ((label, value), ...)): value} of TEXT."""
    out = {}
    for f in text_string_to_metric_families(text):
        for s in f.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(text_or_samples, name, **labels):
    """One sample's value (KeyError if absent)."""
    s = text_or_samples
    if isinstance(s, str):
        s = samples(s)
    return s[(name, tuple(sorted(labels.items())))]


def check_format(text):
    """Problems with TEXT as an exposition: a family without HELP or TYPE,
    a name without the wbd_ prefix, a histogram whose buckets do not add
    up.  Returns a list of strings (empty: fine)."""
    errs = []
    helps, types = set(), set()
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split()[2]
            if name in helps:
                errs.append("%s: HELP twice" % name)
            helps.add(name)
        elif line.startswith("# TYPE "):
            name = line.split()[2]
            if name in types:
                errs.append("%s: TYPE twice" % name)
            types.add(name)
    for name, f in families(text).items():
        # The parser takes a counter's name without its _total.
        full = name + "_total" if f.type == "counter" else name
        if not full.startswith("wbd_"):
            errs.append("%s: not prefixed wbd_" % full)
        if full not in helps or not f.documentation:
            errs.append("%s: no HELP" % full)
        if full not in types or f.type == "unknown":
            errs.append("%s: no TYPE" % full)
        if f.type == "histogram":
            errs += check_histogram(f)
    return errs


def check_histogram(f):
    errs = []
    series = {}
    for s in f.samples:
        key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
        d = series.setdefault(key, {"buckets": []})
        if s.name.endswith("_bucket"):
            d["buckets"].append((float(s.labels["le"]), s.value))
        elif s.name.endswith("_count"):
            d["count"] = s.value
        elif s.name.endswith("_sum"):
            d["sum"] = s.value
    for key, d in series.items():
        b = d["buckets"]
        if not b or b[-1][0] != float("inf"):
            errs.append("%s%s: no +Inf bucket" % (f.name, key))
            continue
        if any(b[i][1] > b[i + 1][1] for i in range(len(b) - 1)):
            errs.append("%s%s: buckets not cumulative" % (f.name, key))
        if d.get("count") != b[-1][1]:
            errs.append("%s%s: _count %r != +Inf bucket %r"
                        % (f.name, key, d.get("count"), b[-1][1]))
        if "sum" not in d:
            errs.append("%s%s: no _sum" % (f.name, key))
    return errs


def monotonic(before, after):
    """Counters (and histogram samples) of BEFORE that went down in AFTER
    (two exposition texts), or vanished."""
    errs = []
    kinds = {}
    for f in text_string_to_metric_families(after):
        for s in f.samples:
            kinds[s.name] = f.type
    a = samples(after)
    for f in text_string_to_metric_families(before):
        if f.type not in ("counter", "histogram"):
            continue
        for s in f.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            if key not in a:
                errs.append("%s%r: gone" % key)
            elif a[key] < s.value:
                errs.append("%s%r: went down from %r to %r"
                            % (key[0], dict(key[1]), s.value, a[key]))
    return errs


def check_or_exit(errs, what):
    if errs:
        for e in errs:
            print("FAIL: %s: %s" % (what, e))
        sys.exit(1)
