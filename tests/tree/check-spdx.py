#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""check-spdx.py - every source file of wbd names its licence: an SPDX line
near its top (C, headers, shell, Python, meson), and COPYING holds the
licence the build declares.

Usage: check-spdx.py SRCDIR
       check-spdx.py --self-test
"""
import os
import re
import sys
import tempfile

TAG = 'SPDX-License-Identifier: GPL-2.0-or-later'
SKIP_DIRS = {'.git', 'corpus', 'regress', '__pycache__'}


def is_source(name):
    return (name.endswith(('.c', '.h', '.sh', '.py'))
            or name in ('meson.build', 'meson_options.txt'))


def check(src):
    bad = []
    for top, dirs, files in os.walk(src):
        rel = os.path.relpath(top, src)
        # Build trees (build, build-asan, ...) and work trees of others.
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS
                         and not (rel == '.' and d.startswith('build')))
        for name in sorted(files):
            if not is_source(name):
                continue
            path = os.path.join(top, name)
            with open(path, encoding='utf-8', errors='replace') as f:
                head = [f.readline() for _ in range(3)]
            if not any(TAG in line for line in head):
                bad.append(os.path.relpath(path, src))
    meson = open(os.path.join(src, 'meson.build')).read()
    m = re.search(r"license\s*:\s*'([^']+)'", meson)
    if not m or m.group(1) != 'GPL-2.0-or-later':
        bad.append('meson.build: license is not GPL-2.0-or-later')
    copying = os.path.join(src, 'COPYING')
    if (not os.path.exists(copying)
            or 'GNU GENERAL PUBLIC LICENSE' not in open(copying).read()
            or 'Version 2' not in open(copying).read()):
        bad.append('COPYING: missing, or not the GPL version 2')
    return bad


def self_test():
    with tempfile.TemporaryDirectory() as d:
        open(os.path.join(d, 'meson.build'), 'w').write(
            "# " + TAG + "\nproject('x', license : 'GPL-2.0-or-later')\n")
        open(os.path.join(d, 'COPYING'), 'w').write(
            'GNU GENERAL PUBLIC LICENSE\nVersion 2, June 1991\n')
        open(os.path.join(d, 'a.c'), 'w').write('/* ' + TAG + ' */\n')
        open(os.path.join(d, 'b.sh'), 'w').write('#!/bin/sh\n# ' + TAG + '\n')
        os.mkdir(os.path.join(d, 'build-x'))
        open(os.path.join(d, 'build-x', 'gen.c'), 'w').write('int x;\n')
        assert check(d) == [], check(d)
        open(os.path.join(d, 'c.h'), 'w').write('/* no licence */\n')
        assert check(d) == ['c.h'], check(d)
        os.remove(os.path.join(d, 'COPYING'))
        assert len(check(d)) == 2, check(d)
    print('check-spdx self-test: ok')
    return 0


def main():
    if sys.argv[1:] == ['--self-test']:
        return self_test()
    bad = check(sys.argv[1])
    for b in bad:
        print('no SPDX line (or wrong licence):', b)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
