#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""metrics-dashboard.py - draw the panels of docs/grafana-wbd.json with
matplotlib from a series of wbd scrapes, where Grafana is not at hand.

Usage: metrics-dashboard.py SERIES.jsonl OUT.png

SERIES.jsonl has one scrape a line, {"t": UNIX_SECONDS, "text": "...the
exposition..."} (scripts/metrics-series.sh writes it).  The queries of
the dashboard are worked out by hand: rate() over a window of
RATE_WINDOW_S, histogram_quantile() interpolating inside a bucket as
Prometheus does.  Needs python3-prometheus-client and python3-matplotlib.
"""
import json
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt                      # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa

RATE_WINDOW_S = 2.0


def load(path):
    points = []
    for line in open(path):
        rec = json.loads(line)
        s = {}
        for f in text_string_to_metric_families(rec["text"]):
            for x in f.samples:
                s[(x.name, tuple(sorted(x.labels.items())))] = x.value
        points.append((rec["t"], s))
    t0 = points[0][0]
    return [(t - t0, s) for t, s in points]


def select(s, name, **match):
    """{labels dict as tuple: value} of NAME's samples matching MATCH."""
    out = {}
    for (n, labels), v in s.items():
        d = dict(labels)
        if n == name and all(d.get(k) == v2 for k, v2 in match.items()):
            out[labels] = v
    return out


def by(s, name, keys, **match):
    """NAME's samples summed by the labels KEYS."""
    out = {}
    for labels, v in select(s, name, **match).items():
        d = dict(labels)
        k = tuple(d.get(x, "") for x in keys)
        out[k] = out.get(k, 0) + v
    return out


def rate(points, fn):
    """[(t, {key: per-second rate of fn(scrape)[key]})] over the window."""
    out = []
    j = 0
    for i, (t, s) in enumerate(points):
        while points[j][0] < t - RATE_WINDOW_S:
            j += 1
        if j == i:
            continue
        t1, s1 = points[j]
        a, b = fn(s1), fn(s)
        out.append((t, {k: max(0.0, (b[k] - a.get(k, 0)) / (t - t1))
                        for k in b}))
    return out


def quantile(q, buckets):
    """histogram_quantile over {le: cumulative count}."""
    les = sorted(buckets)
    total = buckets[les[-1]]
    if total <= 0:
        return None
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le in les:
        c = buckets[le]
        if c >= rank:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c)
        prev_le, prev_c = le, c
    return prev_le


def lines(ax, series, fmt=lambda k: " ".join(k), scale=1.0, style="-"):
    keys = sorted({k for _, d in series for k in d})
    for k in keys:
        xs = [t for t, d in series if k in d and d[k] is not None]
        ys = [d[k] * scale for t, d in series if k in d and d[k] is not None]
        if xs:
            ax.plot(xs, ys, style, label=fmt(k), linewidth=1.2)


def gauge(points, name, keys, **match):
    return [(t, by(s, name, keys, **match)) for t, s in points]


def main():
    points = load(sys.argv[1])
    MiB = 1 << 20
    fig, axes = plt.subplots(5, 2, figsize=(15, 17))
    fig.suptitle("wbd: write-back cache (the panels of "
                 "docs/grafana-wbd.json, drawn from %d scrapes of a test run)"
                 % len(points), fontsize=13)
    ax = axes.flat

    a = next(ax)
    a.set_title("Dirty and at-risk data (MiB)")
    lines(a, gauge(points, "wbd_cache_dirty_bytes", []),
          lambda k: "dirty (cache)", 1 / MiB)
    lines(a, gauge(points, "wbd_cache_under_writeback_bytes", []),
          lambda k: "under writeback (cache)", 1 / MiB)
    lines(a, gauge(points, "wbd_export_at_risk_bytes", ["export"]),
          lambda k: "at risk: " + k[0], 1 / MiB)
    lines(a, gauge(points, "wbd_dirty_background_bytes", []),
          lambda k: "background threshold", 1 / MiB, "--")
    lines(a, gauge(points, "wbd_dirty_limit_bytes", []),
          lambda k: "dirty limit", 1 / MiB, "--")

    a = next(ax)
    a.set_title("Age of the oldest dirty data (s)")
    lines(a, gauge(points, "wbd_export_oldest_dirty_age_seconds", ["export"]))

    a = next(ax)
    a.set_title("Writeback bandwidth by device (MiB/s)")
    lines(a, rate(points, lambda s: by(s, "wbd_device_writeback_bytes_total",
                                       ["device"])), scale=1 / MiB)

    a = next(ax)
    a.set_title("Writeback by reason (MiB/s, stacked)")
    r = rate(points, lambda s: by(s, "wbd_device_writeback_bytes_total",
                                  ["reason"]))
    keys = sorted({k for _, d in r for k in d
                   if any(dd.get(k, 0) > 0 for _, dd in r)})
    if keys:
        a.stackplot([t for t, _ in r],
                    [[d.get(k, 0) / MiB for _, d in r] for k in keys],
                    labels=[k[0] for k in keys], alpha=0.7)

    a = next(ax)
    a.set_title("FLUSH latency (ms)")
    def flush_q(q):
        def fn(s):
            out = {}
            for labels, v in select(s, "wbd_export_request_duration_seconds_bucket",
                                    op="flush").items():
                d = dict(labels)
                out[(d["export"], float(d["le"]))] = v
            return out
        out = []
        for t, d in rate(points, fn):
            per = {}
            for (e, le), v in d.items():
                per.setdefault(e, {})[le] = v
            out.append((t, {("p%d" % round(q * 100), e):
                            quantile(q, b) for e, b in per.items()}))
        return out
    lines(a, flush_q(0.5), scale=1000)
    lines(a, flush_q(0.99), scale=1000, style="--")

    a = next(ax)
    a.set_title("Writer pacing: share of time paused, paced writes/s (/100)")
    lines(a, rate(points, lambda s: by(s, "wbd_throttle_pause_seconds_total",
                                       ["export"])),
          lambda k: "paused " + k[0])
    lines(a, rate(points, lambda s: by(s, "wbd_throttle_paced_writes_total",
                                       ["export"])),
          lambda k: "paced writes/s /100 " + k[0], 0.01, "--")

    a = next(ax)
    a.set_title("Read hit ratio")
    def hits(s):
        h = by(s, "wbd_export_request_duration_seconds_count", ["export"],
               op="read_hit")
        m = by(s, "wbd_export_request_duration_seconds_count", ["export"],
               op="read_miss")
        return {("h",) + k: v for k, v in h.items()} | \
            {("m",) + k: v for k, v in m.items()}
    ratio = []
    for t, d in rate(points, hits):
        out = {}
        for k, v in d.items():
            if k[0] == "h":
                tot = v + d.get(("m",) + k[1:], 0)
                if tot > 0:
                    out[k[1:]] = v / tot
        ratio.append((t, out))
    lines(a, ratio)
    a.set_ylim(-0.05, 1.05)

    a = next(ax)
    a.set_title("Requests/s by export and command")
    r = rate(points, lambda s: by(s, "wbd_export_requests_total",
                                  ["export", "command"]))
    busy = {k for _, d in r for k, v in d.items() if v > 0}
    lines(a, [(t, {k: v for k, v in d.items() if k in busy}) for t, d in r])

    a = next(ax)
    a.set_title("Errors: failed runs/s, request errors/s, back-off (s)")
    lines(a, rate(points, lambda s: by(
        s, "wbd_device_writeback_failed_runs_total", ["device"])),
        lambda k: "failed runs/s " + k[0])
    lines(a, rate(points, lambda s: by(s, "wbd_export_request_errors_total",
                                       ["export"])),
          lambda k: "request errors/s " + k[0])
    lines(a, gauge(points, "wbd_device_backoff_seconds", ["device"]),
          lambda k: "back-off left " + k[0], style=":")

    a = next(ax)
    a.set_title("Remote backing servers")
    lines(a, gauge(points, "wbd_remote_connected", ["device"]),
          lambda k: "connected " + k[0])
    lines(a, gauge(points, "wbd_remote_connections", ["device"]),
          lambda k: "connections " + k[0], style="--")

    for a in axes.flat:
        a.grid(True, alpha=0.3)
        a.set_xlabel("seconds")
        if a.get_legend_handles_labels()[0]:
            a.legend(fontsize=8, loc="upper left")
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(sys.argv[2], dpi=80)


if __name__ == "__main__":
    main()
