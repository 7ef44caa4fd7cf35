#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""check-build-depends.py TOP - packaging/debian/control's Build-Depends
name every package the build needs, so the package builds in a clean
environment from them alone.

What the build needs is read from the build files, not from a list kept
here: each dependency('NAME') that meson.build and its subdirectories
require (plus 'systemd', whose systemd.pc places the units), found
through its pkg-config file and `dpkg -S`, and each header that a
find_library() fallback asks for (libev's ev.h) likewise; besides them
the tools of debian/rules (debhelper, meson, ninja, pkg-config).  Then
dpkg-checkbuilddeps checks that the field parses and is satisfied here.

And scripts/install-deps.sh, which README's test command runs first on a
fresh machine, must install every Build-Depends (one of its alternatives,
by name or by a listed package's Provides, as debhelper provides
debhelper-compat): the package stage needs them, and a machine where they
happen to be installed already hides a missing one.
Exit 0 if every one is listed, 1 naming the missing ones, 77 (skip)
without dpkg or pkg-config."""
import glob
import os
import re
import shutil
import subprocess
import sys

top = sys.argv[1]
if not shutil.which("dpkg") or not shutil.which("pkg-config"):
    print("SKIP: dpkg or pkg-config is not installed")
    sys.exit(77)

control = open(os.path.join(top, "packaging/debian/control")).read()
m = re.search(r"^Build-Depends:(.*?)(?=^\S)", control, re.M | re.S)
listed = set()
items = []          # each Build-Depends item: its alternatives' names
for item in m.group(1).split(","):
    alts = []
    for alt in item.split("|"):
        name = re.sub(r"\(.*?\)|\[.*?\]|<.*?>", "", alt).strip()
        if name:
            listed.add(name)
            alts.append(name)
    if alts:
        items.append(alts)

# dpkg-checkbuilddeps takes build-essential as an implicit Build-Depends.
items.append(["build-essential"])

# The packages install-deps.sh installs: its PACKAGES=( ... ) array.
deps_sh = open(os.path.join(top, "scripts/install-deps.sh")).read()
arr = re.search(r"^PACKAGES=\((.*?)^\)", deps_sh, re.M | re.S)
if not arr:
    print("cannot find PACKAGES=( ... ) in scripts/install-deps.sh")
    sys.exit(1)
installed_by_script = set()
for line in arr.group(1).splitlines():
    installed_by_script.update(line.split("#")[0].split())
provided = set()
for pkg in installed_by_script:
    # Installed: dpkg knows; not yet: apt's lists (the newest version).
    r = subprocess.run(["dpkg-query", "-W",
                        "-f=${db:Status-Status} ${Provides}", pkg],
                       capture_output=True, text=True)
    status, _, field = r.stdout.partition(" ")
    if status != "installed" and shutil.which("apt-cache"):
        r = subprocess.run(["apt-cache", "show", "--no-all-versions", pkg],
                           capture_output=True, text=True)
        pm = re.search(r"^Provides:(.*)$", r.stdout, re.M)
        field = pm.group(1) if pm else ""
    for p in field.split(","):
        p = re.sub(r"\(.*?\)", "", p).strip()
        if p:
            provided.add(p)
not_installed = [" | ".join(alts) for alts in items
                 if not any(a in installed_by_script or a in provided
                            for a in alts)]
if not_installed:
    print("scripts/install-deps.sh does not install these Build-Depends "
          "(a fresh machine lacks them): " + ", ".join(not_installed))
    sys.exit(1)

# The pkg-config names and headers the build requires.
texts = [open(f).read() for f in
         [os.path.join(top, "meson.build")] +
         glob.glob(os.path.join(top, "*/meson.build"))]
pcs = {"systemd"}
headers = set()
for t in texts:
    for call in re.finditer(r"dependency\('([^']+)'([^)]*)\)", t):
        name, rest = call.group(1), call.group(2)
        if name == "threads" or "required : false" in rest or \
           "get_option('tests'" in rest:
            continue
        pcs.add(name)
    for call in re.finditer(r"find_library\([^)]*has_headers : \[([^\]]*)\]", t):
        headers.update(re.findall(r"'([^']+)'", call.group(1)))


def owner(path):
    out = subprocess.run(["dpkg", "-S", path], capture_output=True,
                         text=True)
    if out.returncode != 0:
        return None
    return out.stdout.split(":")[0].strip()


need = {"debhelper-compat": "debian/rules (dh)", "meson": "the build system",
        "ninja-build": "the build system", "pkg-config": "dependency()"}
for pc in sorted(pcs):
    d = subprocess.run(["pkg-config", "--variable=pcfiledir", pc],
                       capture_output=True, text=True).stdout.strip()
    pkg = owner(os.path.join(d, pc + ".pc")) if d else None
    if not pkg:
        print(f"cannot tell which package has {pc}.pc (is it installed?)")
        sys.exit(1)
    need[pkg] = f"dependency('{pc}')"
for h in sorted(headers):
    pkg = owner(os.path.join("/usr/include", h))
    if not pkg:
        print(f"cannot tell which package has {h}")
        sys.exit(1)
    need[pkg] = f"the header {h}"

missing = [f"{p} (for {why})" for p, why in sorted(need.items())
           if p not in listed]
if missing:
    print("Build-Depends lacks: " + ", ".join(missing))
    sys.exit(1)
if shutil.which("dpkg-checkbuilddeps"):
    r = subprocess.run(["dpkg-checkbuilddeps",
                        os.path.join(top, "packaging/debian/control")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("dpkg-checkbuilddeps: " + (r.stderr or r.stdout).strip())
        sys.exit(1)
print("Build-Depends covers: " + ", ".join(sorted(need)))
