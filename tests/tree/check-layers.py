#!/usr/bin/env python3
"""check-layers.py - the daemon's layering, checked from its #includes.

A module is a .c file and its .h (export.c + export.h is "export"); module
A depends on module B when A's .c or .h includes B's header.  The rules:

  1. the module graph of daemon/ has no cycle (layers point one way);
  2. export.c includes neither conn.h nor ioloop.h (the connection owns
     the reply; the export returns a verdict);
  3. cache.c includes nothing from daemon/ but cache.h (and common/);
  4. only backend*.c call a backend's operations (b->ops->...): everyone
     else goes through backend.h's door.

Usage: check-layers.py DAEMON_DIR      check the tree, print the layers
       check-layers.py --self-test     the checker catches what it should
Exit 0 if every rule holds, 1 (naming each break) if not.
"""
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)\.h"', re.M)
OPS_CALL = re.compile(r'->ops->')


def modules(d):
    """Module name -> (set of daemon/ modules it includes, files)."""
    headers = {f[:-2] for f in os.listdir(d) if f.endswith('.h')}
    deps, files = {}, {}
    for f in sorted(os.listdir(d)):
        if not f.endswith(('.c', '.h')):
            continue
        m = f[:-2]
        text = open(os.path.join(d, f), encoding='utf-8').read()
        files.setdefault(m, []).append((f, text))
        deps.setdefault(m, set())
        for inc in INCLUDE.findall(text):
            if inc in headers and inc != m:
                deps[m].add(inc)
    return deps, files


def cycles(deps):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(deps.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(deps):
        if v not in index:
            visit(v)
    return out


def layers(deps):
    """Each module's height: 0 for those that include no daemon module."""
    height = {}

    def h(v, seen=()):
        if v in height:
            return height[v]
        if v in seen:
            return 0
        height[v] = 1 + max((h(w, seen + (v,)) for w in deps[v]), default=-1)
        return height[v]

    for v in deps:
        h(v)
    return height


def check(d):
    deps, files = modules(d)
    errors = []
    for comp in cycles(deps):
        errors.append('include cycle: ' + ' -> '.join(comp))
    for f, text in files.get('export', []):
        if f == 'export.c':
            for bad in ('conn', 'ioloop'):
                if bad in INCLUDE.findall(text):
                    errors.append(f'export.c includes {bad}.h')
    for f, text in files.get('cache', []):
        if f == 'cache.c':
            extra = deps_of_file(text, deps) - {'cache'}
            if extra:
                errors.append('cache.c includes daemon headers: ' +
                              ', '.join(sorted(extra)))
    for m, fl in files.items():
        if m.startswith('backend'):
            continue
        for f, text in fl:
            for n, line in enumerate(text.splitlines(), 1):
                if OPS_CALL.search(line):
                    errors.append(f'{f}:{n}: calls a backend operation '
                                  'directly (use backend.h)')
    return deps, errors


def deps_of_file(text, deps):
    return {inc for inc in INCLUDE.findall(text) if inc in deps}


def write(d, name, text):
    with open(os.path.join(d, name), 'w', encoding='utf-8') as f:
        f.write(text)


def self_test():
    """A clean tree passes; each kind of break is caught."""
    failures = 0
    cases = {
        'clean': ({}, False),
        'cycle': ({'cache.h': '#include "pool.h"\n'}, True),
        'export-conn': ({'export.c': '#include "export.h"\n'
                                     '#include "conn.h"\n'}, True),
        'cache-up': ({'cache.c': '#include "cache.h"\n'
                                 '#include "job.h"\n'}, True),
        'ops': ({'export.c': '#include "export.h"\n'
                             'int f(struct backend *b)'
                             '{ return b->ops->flush(b); }\n'}, True),
    }
    base = {
        'cache.h': '', 'cache.c': '#include "cache.h"\n',
        'job.h': '', 'pool.h': '#include "job.h"\n',
        'pool.c': '#include "pool.h"\n#include "cache.h"\n',
        'conn.h': '', 'conn.c': '#include "conn.h"\n#include "export.h"\n',
        'export.h': '', 'export.c': '#include "export.h"\n#include "pool.h"\n',
        'backend.h': '', 'backend.c': 'int g(struct backend *b)'
                                      '{ return b->ops->flush(b); }\n',
    }
    for name, (change, should_fail) in cases.items():
        with tempfile.TemporaryDirectory() as d:
            for f, t in {**base, **change}.items():
                write(d, f, t)
            _, errors = check(d)
            if bool(errors) != should_fail:
                print(f'self-test {name}: expected '
                      f'{"a failure" if should_fail else "a pass"}, '
                      f'got {errors or "a pass"}')
                failures += 1
    print('self-test: ' + ('FAILED' if failures else 'ok'))
    return 1 if failures else 0


def main():
    if len(sys.argv) == 2 and sys.argv[1] == '--self-test':
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__.split('\n\n')[2], file=sys.stderr)
        return 2
    deps, errors = check(sys.argv[1])
    height = layers(deps)
    for level in sorted(set(height.values())):
        print(f'layer {level}: ' +
              ' '.join(sorted(m for m in height if height[m] == level)))
    for e in errors:
        print('FAIL: ' + e)
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
