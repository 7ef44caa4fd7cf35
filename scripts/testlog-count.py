#!/usr/bin/env python3
"""testlog-count.py - count a meson testlog.json: prints "PASSED FAILED
SKIPPED" (EXPECTEDFAIL counts as passed; FAIL, TIMEOUT, ERROR and
UNEXPECTEDPASS as failed).  Used by scripts/test.sh and test-tsan.sh."""
import json
import sys

p = f = s = 0
for line in open(sys.argv[1]):
    line = line.strip()
    if not line:
        continue
    r = json.loads(line).get("result", "")
    if r in ("OK", "EXPECTEDFAIL"):
        p += 1
    elif r == "SKIP":
        s += 1
    else:
        f += 1
print(p, f, s)
