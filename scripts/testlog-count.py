#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""testlog-count.py [--failed] TESTLOG - count a meson testlog.json: prints
"PASSED FAILED SKIPPED" (EXPECTEDFAIL counts as passed; FAIL, TIMEOUT,
ERROR and UNEXPECTEDPASS as failed).  With --failed, prints instead the
name of each failed test, one a line.  Used by scripts/test.sh and
test-tsan.sh."""
import json
import sys

args = sys.argv[1:]
names_only = args[:1] == ["--failed"]
if names_only:
    args = args[1:]
p = f = s = 0
failed = []
for line in open(args[0]):
    line = line.strip()
    if not line:
        continue
    t = json.loads(line)
    r = t.get("result", "")
    if r in ("OK", "EXPECTEDFAIL"):
        p += 1
    elif r == "SKIP":
        s += 1
    else:
        f += 1
        failed.append(t.get("name", "?"))
if names_only:
    for n in failed:
        print(n)
else:
    print(p, f, s)
