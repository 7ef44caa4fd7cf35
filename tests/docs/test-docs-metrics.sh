#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# docs/metrics.md documents exactly the metrics wbd exposes: every family
# of a live exposition (with a local and a remote export, so that every
# family has samples) is in its tables with its type and labels, and the
# tables name none that wbd lacks; every value of the command, op and
# reason labels is in its Labels row, and the histogram bounds are the
# ones listed.  And the Grafana dashboard (docs/grafana-wbd.json) queries
# only metrics wbd exposes.
source "${SRCDIR:?SRCDIR must name tests/metrics}/lib-metrics.sh"
: "${DOCDIR:?DOCDIR must name docs/}"
need_python_nbd
need_prometheus
need_wbctl

start_local_and_remote
wbctl metrics >"$T/metrics.prom" || fail "wbctl metrics failed"

"$MPY" - "$T/metrics.prom" "$DOCDIR/metrics.md" "$DOCDIR/grafana-wbd.json" <<'PY' || fail "see above"
import json, re, sys
from metrics import families
text = open(sys.argv[1]).read()
doc = open(sys.argv[2]).read()

exposed = {}
values = {}
bounds = set()
for name, f in families(text).items():
    full = name + "_total" if f.type == "counter" else name
    labels = set()
    for s in f.samples:
        for k, v in s.labels.items():
            if k == "le":
                bounds.add(v)
                continue
            labels.add(k)
            values.setdefault(k, set()).add(v)
    exposed[full] = (f.type, labels)

row = re.compile(r"^\| `(wbd_[a-z0-9_]+)` \| (counter|gauge|histogram) \| "
                 r"([^|]*) \|", re.M)
documented = {}
for name, kind, labels in row.findall(doc):
    if name in documented:
        sys.exit("FAIL: %s is documented twice" % name)
    labels = labels.strip()
    documented[name] = (kind, set() if labels == "—" else
                        {l.strip().strip("`") for l in labels.split(",")})
errs = []
for name in sorted(set(exposed) - set(documented)):
    errs.append("%s is exposed but not in docs/metrics.md" % name)
for name in sorted(set(documented) - set(exposed)):
    errs.append("docs/metrics.md documents %s, which wbd does not expose" % name)
for name in sorted(set(exposed) & set(documented)):
    if exposed[name] != documented[name]:
        errs.append("%s: exposed as %s %s, documented as %s %s"
                    % (name, exposed[name][0], sorted(exposed[name][1]),
                       documented[name][0], sorted(documented[name][1])))
# The Labels table: every label, and every value of the enumerated ones.
for label in sorted({l for _, ls in exposed.values() for l in ls}):
    m = re.search(r"^\| `%s` \| (.*) \|$" % label, doc, re.M)
    if not m:
        errs.append("label %s is not in the Labels table" % label)
    elif label in ("command", "op", "reason"):
        for v in sorted(values[label]):
            if "`%s`" % v not in m.group(1):
                errs.append("label %s: value %s is not documented" % (label, v))
listed = re.search(r"bounds are ([^\n]+(?:\n[^\n]+)*?) seconds, then `\+Inf`",
                   doc)
if not listed:
    errs.append("the histogram bounds are not listed")
else:
    doc_bounds = {float(x) for x in re.findall(r"[0-9.]+(?:e-[0-9]+)?",
                                               listed.group(1))}
    if doc_bounds != {float(b) for b in bounds if b != "+Inf"}:
        errs.append("histogram bounds: documented %s, exposed %s"
                    % (sorted(doc_bounds), sorted(bounds)))
# The dashboard's queries.
dash = json.load(open(sys.argv[3]))
exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
exprs += [v["definition"] for v in dash["templating"]["list"]
          if "definition" in v]
for expr in exprs:
    for name in re.findall(r"\bwbd_[a-z0-9_]+", expr):
        base = re.sub(r"_(bucket|count|sum)$", "", name)
        if name not in exposed and not (base in exposed and
                                         exposed[base][0] == "histogram"):
            errs.append("grafana-wbd.json queries %s, which wbd does not "
                        "expose" % name)
for e in errs:
    print("FAIL: " + e)
if errs:
    sys.exit(1)
print("%d metrics documented and exposed alike" % len(exposed))
PY
