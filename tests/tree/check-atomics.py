#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""check-atomics.py - the daemon and wbctl share memory between threads
only through C11 atomics: fields declared _Atomic, accessed with
<stdatomic.h>'s generic functions or common/atomics.h's short forms, each
naming its memory order.  A raw GCC builtin (__atomic_load_n,
__sync_fetch_and_add, ...) works on a plain field, so a plain, racy access
to the same field would go unnoticed: none may appear in common/, daemon/
or client/ (comments and strings aside) outside common/atomics.h.

Usage: check-atomics.py SRCDIR
       check-atomics.py --self-test
"""
import os
import re
import sys
import tempfile

DIRS = ('common', 'daemon', 'client')
ALLOWED = {os.path.join('common', 'atomics.h')}
RAW = re.compile(r'\b__(atomic|sync)_[a-z_]+\b')


def code_only(text):
    """TEXT with comments, string and character literals blanked (newlines
    kept, so that line numbers hold)."""
    return re.sub(
        r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
        lambda m: re.sub(r'[^\n]', ' ', m.group(0)), text, flags=re.S)


def check(src):
    bad = []
    for sub in DIRS:
        for top, dirs, files in os.walk(os.path.join(src, sub)):
            dirs.sort()
            for name in sorted(files):
                if not name.endswith(('.c', '.h')):
                    continue
                path = os.path.join(top, name)
                rel = os.path.relpath(path, src)
                if rel in ALLOWED:
                    continue
                with open(path, encoding='utf-8', errors='replace') as f:
                    code = code_only(f.read())
                for m in RAW.finditer(code):
                    line = code.count('\n', 0, m.start()) + 1
                    bad.append('%s:%d: %s' % (rel, line, m.group(0)))
    return bad


def self_test():
    with tempfile.TemporaryDirectory() as d:
        for sub in ('common', 'daemon', 'client'):
            os.makedirs(os.path.join(d, sub))
        open(os.path.join(d, 'common', 'atomics.h'), 'w').write(
            '#define load_relaxed(p) __atomic_load_n((p), __ATOMIC_RELAXED)\n')
        open(os.path.join(d, 'daemon', 'a.c'), 'w').write(
            '/* not __atomic_add_fetch: add_relaxed */\n'
            'static const char *s = "__atomic_load_n";\n'
            'void f(_Atomic int *n) { add_relaxed(n, 1); }\n')
        assert check(d) == [], check(d)
        open(os.path.join(d, 'client', 'b.c'), 'w').write(
            'static unsigned n;\n'
            'void g(void)\n{\n'
            '\t__atomic_add_fetch(&n, 1, __ATOMIC_RELAXED);\n}\n')
        assert check(d) == ['client/b.c:4: __atomic_add_fetch'], check(d)
        open(os.path.join(d, 'daemon', 'c.h'), 'w').write(
            '// __sync_synchronize() in a comment is fine\n'
            'static inline void h(int *p) { __sync_fetch_and_add(p, 1); }\n')
        assert check(d) == ['daemon/c.h:2: __sync_fetch_and_add',
                            'client/b.c:4: __atomic_add_fetch'], check(d)
    print('check-atomics self-test: ok')
    return 0


def main():
    if sys.argv[1:] == ['--self-test']:
        return self_test()
    bad = check(sys.argv[1])
    for b in bad:
        print('raw atomic builtin (use _Atomic and common/atomics.h):', b)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
