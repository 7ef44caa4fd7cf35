#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""check-installed-docs.py TOP BUILD - every document that an installed
text points to is installed too.

The manual pages (docs/*.[158]) name documents as docs/NAME, which are
installed as /usr/share/doc/wbd/NAME; the systemd units name them by
Documentation=file://DOCDIR/NAME; README.Debian by /usr/share/doc/wbd/NAME;
metrics.md names the files "beside this file" (the Grafana dashboard and
its picture), and so does README.md, installed beside them (but for
benchmarks.md and vm-test.md, about the source tree).  Each one named must be in the build's install plan (meson
introspect --installed) under .../share/doc/wbd/, uncompressed where the
package keeps it so (debian/rules excludes .md, .json and .png from
dh_compress: a file:// link or a path in a man page must open).
Exit 0 if every one is installed, 1 naming each that is not."""
import glob
import json
import os
import re
import subprocess
import sys

top, build = sys.argv[1], sys.argv[2]
r = subprocess.run(["meson", "introspect", build, "--installed"],
                   capture_output=True, text=True)
if r.returncode != 0:
    print("meson introspect --installed failed: " + r.stderr.strip())
    sys.exit(1)
installed = {os.path.basename(dest) for dest in json.loads(r.stdout).values()
             if "/doc/wbd/" in dest and "/examples/" not in dest}

named = {}          # NAME -> where it is named
for page in sorted(glob.glob(os.path.join(top, "docs", "*.[158]"))):
    text = open(page).read().replace("\\-", "-")
    for name in re.findall(r"docs/([A-Za-z0-9_.-]+\.(?:md|json|png))", text):
        named.setdefault(name, os.path.relpath(page, top))
for unit in sorted(glob.glob(os.path.join(top, "packaging", "*.in"))):
    for name in re.findall(r"Documentation=.*?file://@docdir@/(\S+)",
                           open(unit).read()):
        named.setdefault(name, os.path.relpath(unit, top))
readme = os.path.join(top, "packaging", "debian", "README.Debian")
for name in re.findall(r"/usr/share/doc/wbd/([A-Za-z0-9_-]+(?:\.[a-z]+)?)",
                       open(readme).read()):
    named.setdefault(name, "packaging/debian/README.Debian")
# README.md, installed beside them, names the rest; but for the two about
# the source tree, which are not installed.
SOURCE_TREE_ONLY = {"benchmarks.md", "vm-test.md"}
for name in re.findall(r"docs/([A-Za-z0-9_-]+\.(?:md|json|png))",
                       open(os.path.join(top, "README.md")).read()):
    if name not in SOURCE_TREE_ONLY:
        named.setdefault(name, "README.md")
metrics = open(os.path.join(top, "docs", "metrics.md")).read()
for name in re.findall(r"`([A-Za-z0-9_.-]+\.(?:json|png))`", metrics):
    if os.path.exists(os.path.join(top, "docs", name)):
        named.setdefault(name, "docs/metrics.md")

if not named:
    print("no document named anywhere: the patterns no longer match")
    sys.exit(1)
missing = [f"{n} (named in {w})" for n, w in sorted(named.items())
           if n not in installed]
if missing:
    print("named but not installed in share/doc/wbd: " + ", ".join(missing))
    sys.exit(1)
rules = open(os.path.join(top, "packaging", "debian", "rules")).read()
for ext in (".md", ".json", ".png"):
    if not re.search(r"dh_compress\b.*-X\s*" + re.escape(ext), rules):
        print(f"debian/rules compresses {ext} documents: the paths named "
              "would not open (they become .gz)")
        sys.exit(1)
print("installed: " + ", ".join(sorted(named)))
