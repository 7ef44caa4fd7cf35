#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""json-members.py FILE...: print every member name of the JSON objects
in FILES (one JSON document each, or one per line), recursively, one a
line."""
import json
import sys


def walk(v, out):
    if isinstance(v, dict):
        for k, x in v.items():
            out.add(k)
            walk(x, out)
    elif isinstance(v, list):
        for x in v:
            walk(x, out)


names = set()
for path in sys.argv[1:]:
    text = open(path).read()
    try:
        walk(json.loads(text), names)
    except json.JSONDecodeError:
        for line in text.splitlines():
            if line.strip():
                walk(json.loads(line), names)
print("\n".join(sorted(names)))
