#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""charts.py RESULTS-DIR [OUT-DIR] - the charts of a bench/run.sh run.

Reads RESULTS-DIR/summary.json, written by bench/run.sh (for a run from
before it wrote one, the fio JSON files RESULTS-DIR/SERVER-CASE-rN.json),
and writes PNG files into OUT-DIR (default RESULTS-DIR/bench):

  case-CASE.png   a bar chart per case: a bar per server, the median of
                  the rounds, the error bar from the lowest round to the
                  highest; a dashed line at the target's level where issue
                  13 sets one against nbdkit memory;
  timeline-wbd-CASE.png
                  wbd's dirty data and writeback bandwidth over time during
                  CASE (sustained-randwrite-4k), from the `wbctl --json
                  status` samples bench/run.sh took, one line per round.

Prints the path of each file written.  Needs python3-matplotlib (Debian's
package, in the system interpreter).
"""

import glob
import json
import os
import re
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

LOADS = ("randwrite-4k", "randread-4k", "write-1m", "read-1m")
FIO_NAME = re.compile(
    r"^(?P<server>.+?)-(?P<case>(?:burst-|sustained-)?(?:%s)(?:-4conn)?)"
    r"-r(?P<round>\d+)\.json$" % "|".join(LOADS))
MIB = 1048576.0

# A colour per server, wbd's apart from the rest.
COLOURS = {"wbd": "#d95f02", "wbd-tls": "#e6ab02", "nbdkit-memory": "#1b9e77",
           "nbdkit-null": "#7570b3", "nbdkit-file": "#66a61e",
           "nbdkit-file-cache": "#a6761d", "qemu-nbd": "#666666",
           # bench/net/run.sh's: the remote alone, nbdkit's cache filter
           "remote": "#1b9e77", "nbdkit-cache": "#a6761d"}


def case_unit(case):
    return "IOPS" if "-4k" in case else "MiB/s"


def case_label(case):
    """The label bench/run.sh gives a case (for old results without one)."""
    load = case
    profile = ""
    for p in ("burst", "sustained"):
        if case.startswith(p + "-"):
            profile, load = p + " ", case[len(p) + 1:]
    conns = 4 if load.endswith("-4conn") else 1
    load = load[:-len("-4conn")] if conns > 1 else load
    words = {"randwrite-4k": "4K randwrite", "randread-4k": "4K randread",
             "write-1m": "1M write", "read-1m": "1M read"}[load]
    qd = (32 if load.endswith("-4k") else 8) // conns
    if conns > 1:
        return "%s%s %d conns × QD%d" % (profile, words, conns, qd)
    return "%s%s QD%d" % (profile, words, qd)


def load_legacy(results):
    """A summary built from the fio JSON files of a run without summary.json."""
    runs, servers, cases = [], [], []
    for path in sorted(glob.glob(os.path.join(results, "*.json"))):
        m = FIO_NAME.match(os.path.basename(path))
        if not m:
            continue
        case = m.group("case")
        try:
            with open(path) as f:
                job = json.load(f)["jobs"][0]
        except (OSError, ValueError, KeyError, IndexError):
            continue
        if job.get("error", 0) != 0:
            continue
        d = job["read" if "read" in case else "write"]
        runs.append({"server": m.group("server"), "case": case,
                     "round": int(m.group("round")), "iops": d["iops"],
                     "mib_s": d["bw_bytes"] / MIB})
        if m.group("server") not in servers:
            servers.append(m.group("server"))
        if case not in cases:
            cases.append(case)
    order = {c: i for i, c in enumerate(
        "%s%s%s" % (p, l, s) for s in ("", "-4conn")
        for p in ("burst-", "sustained-", "") for l in LOADS)}
    cases.sort(key=lambda c: order.get(c, 99))
    return {"servers": servers, "runs": runs, "targets": [], "timelines": [],
            "cases": [{"name": c, "label": case_label(c), "unit": case_unit(c)}
                      for c in cases]}


def load(results):
    path = os.path.join(results, "summary.json")
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return load_legacy(results)


def figure(run, unit):
    v = run.get("iops") if unit == "IOPS" else run.get("mib_s")
    return v if isinstance(v, (int, float)) else None


def bar_chart(summary, case, out):
    """One case: a bar per server with the rounds' spread."""
    name, unit = case["name"], case.get("unit") or case_unit(case["name"])
    servers, med, lo, hi = [], [], [], []
    for s in summary["servers"]:
        vals = [figure(r, unit) for r in summary["runs"]
                if r["server"] == s and r["case"] == name]
        vals = [v for v in vals if v is not None]
        if not vals:
            continue
        m = statistics.median(vals)
        servers.append(s)
        med.append(m)
        lo.append(m - min(vals))
        hi.append(max(vals) - m)
    if not servers:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    x = range(len(servers))
    ax.bar(x, med, yerr=[lo, hi], capsize=5, width=0.65,
           color=[COLOURS.get(s, "#999999") for s in servers],
           error_kw={"elinewidth": 1.2, "ecolor": "black"})
    top = max(m + h for m, h in zip(med, hi))
    for i, m in enumerate(med):
        ax.text(i, m + hi[i] + top * 0.015,
                "%.0f" % m if unit == "IOPS" else "%.1f" % m,
                ha="center", va="bottom", fontsize=8)
    for t in summary.get("targets", []):
        if (t.get("case") == name and t.get("kind") == "throughput"
                and t.get("op") and "nbdkit-memory" in servers):
            level = med[servers.index("nbdkit-memory")] * float(t["limit"])
            ax.axhline(level, color="black", linestyle="--", linewidth=1,
                       label="target: %s" % t["goal"])
            ax.legend(loc="lower right", fontsize=8, framealpha=0.9)
    ax.set_xticks(list(x))
    ax.set_xticklabels(servers, rotation=20, ha="right", fontsize=9)
    ax.set_ylabel(unit)
    ax.set_ylim(0, top * 1.12)
    rounds = summary.get("rounds")
    ax.set_title("%s (%s): median of %s rounds, min..max"
                 % (case.get("label") or case_label(name), unit,
                    rounds if rounds else "the"), fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def read_samples(path):
    """The {"t": ..., "status": ...} lines of a sampled run (a line cut short
    when the sampler was stopped is skipped)."""
    samples = []
    with open(path) as f:
        for line in f:
            try:
                s = json.loads(line)
            except ValueError:
                continue
            if isinstance(s.get("status"), dict):
                samples.append(s)
    return samples


def io_window(t, results):
    """When fio's job ran (Unix times): from bench/run.sh's record, else
    from the fio JSON (timestamp_ms is when fio reported, as the job
    ended), else the fio process's own start and end."""
    if isinstance(t.get("io_start"), (int, float)):
        return float(t["io_start"]), float(t["io_end"])
    try:
        with open(os.path.join(results, "%s-%s-r%s.json"
                               % (t["server"], t["case"], t["round"]))) as f:
            fio = json.load(f)
        end = fio["timestamp_ms"] / 1000.0
        return end - fio["jobs"][0]["job_runtime"] / 1000.0, end
    except (OSError, ValueError, KeyError, IndexError):
        return float(t["fio_start"]), float(t["fio_end"])


def timeline_chart(summary, results, out):
    """wbd's dirty data and writeback bandwidth during the sampled case."""
    runs = [t for t in summary.get("timelines", [])
            if os.path.exists(os.path.join(results, t["file"]))]
    if not runs:
        return None
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    thresholds = None
    top_dirty = 0.0
    for t in runs:
        samples = read_samples(os.path.join(results, t["file"]))
        if len(samples) < 2:
            continue
        t0, t1 = io_window(t, results)
        xs, dirty, wb_x, wb_bw = [], [], [], []
        prev = None
        for s in samples:
            st = s["status"]
            written = sum(d.get("written_bytes", 0) for d in st.get("devices", []))
            xs.append(s["t"] - t0)
            dirty.append(st["cache"]["dirty_bytes"] / MIB)
            if prev is not None and s["t"] > prev[0]:
                wb_x.append(s["t"] - t0)
                wb_bw.append((written - prev[1]) / MIB / (s["t"] - prev[0]))
            prev = (s["t"], written)
            thresholds = thresholds or st.get("thresholds")
        top_dirty = max([top_dirty] + dirty)
        label = "round %s" % t["round"]
        line, = top.plot(xs, dirty, label=label, linewidth=1.2)
        bottom.step(wb_x, wb_bw, where="pre", label=label, linewidth=1.2,
                    color=line.get_color())
        for ax in (top, bottom):
            ax.axvline(t1 - t0, color=line.get_color(), linestyle=":",
                       linewidth=1)
    # The dirty axis goes a little above the background threshold or the
    # most dirty data, whichever is higher: a dirty limit far above both
    # is named, not drawn.
    ymax = top_dirty
    if thresholds and thresholds.get("dirty_background_bytes"):
        ymax = max(ymax, thresholds["dirty_background_bytes"] / MIB)
    ymax = ymax * 1.3 or 1
    if thresholds:
        for key, name in (("dirty_background_bytes", "background threshold"),
                          ("dirty_bytes", "dirty limit")):
            if not thresholds.get(key):
                continue
            v = thresholds[key] / MIB
            if v <= ymax:
                top.axhline(v, color="grey", linestyle="--", linewidth=0.8)
                top.text(0, v, " %s (%.0f MiB)" % (name, v), fontsize=8,
                         va="bottom", color="grey")
            else:
                top.text(0, ymax * 0.97, " %s: %.0f MiB, above the chart"
                         % (name, v), fontsize=8, va="top", color="grey")
    top.axvline(0, color="black", linewidth=0.8)
    bottom.axvline(0, color="black", linewidth=0.8)
    top.set_ylabel("dirty (MiB)")
    bottom.set_ylabel("written back (MiB/s)")
    bottom.set_xlabel("seconds since fio's job started (dotted: it ended; "
                      "then the FLUSH)")
    top.set_title("wbd during %s: dirty data and writeback"
                  % next((c.get("label") for c in summary["cases"]
                          if c["name"] == runs[0]["case"]), runs[0]["case"]),
                  fontsize=10)
    top.legend(fontsize=8, loc="upper right")
    top.grid(alpha=0.3)
    bottom.grid(alpha=0.3)
    top.set_ylim(0, ymax)
    bottom.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def main(argv):
    if len(argv) not in (2, 3) or argv[1] in ("-h", "--help"):
        sys.stderr.write(__doc__)
        return 2
    results = argv[1]
    out_dir = argv[2] if len(argv) == 3 else os.path.join(results, "bench")
    summary = load(results)
    if not summary["runs"]:
        sys.stderr.write("charts.py: no runs in %s\n" % results)
        return 1
    os.makedirs(out_dir, exist_ok=True)
    for case in summary["cases"]:
        f = bar_chart(summary, case,
                      os.path.join(out_dir, "case-%s.png" % case["name"]))
        if f:
            print(f)
    timelines = summary.get("timelines", [])
    if timelines:
        f = timeline_chart(summary, results, os.path.join(
            out_dir, "timeline-%s-%s.png" % (timelines[0]["server"],
                                             timelines[0]["case"])))
        if f:
            print(f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
