#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""check-layers.py - the daemon's components and layers, checked from its
build files and its #includes.

daemon/ is one folder per component (daemon/cache/, daemon/net/, ...), the
program itself (main.c) at the top in daemon/ and common/ (beside daemon/,
shared with wbctl) at the bottom.  A component's meson.build builds a static
library and declares the components it stands on (FOO_dep for daemon/FOO/);
it may include its own headers and those of every component it stands on,
directly or through another: the build gives it no other include directory.
The order is read from the build files, so the checker and the build cannot
disagree.  The rules:

  1. each component folder's meson.build builds a static library exposed
     as FOO_dep = declare_dependency(...);
  2. components stand on each other one way (no cycle of FOO_dep);
  3. no wrong-way include: a file includes headers of its own component
     or of one its component may include, nothing else of the tree;
  4. no include cycle between files, nor between modules (a .c and its
     .h: export.c + export.h is "export");
  5. a header's name is used once in the tree (#include "x.h" names one
     file, whatever the include path);
  6. export.c includes neither conn.h nor ioloop.h (the connection owns
     the reply; the export returns a verdict); cache.c and wbuf.c include
     no header of the tree but cache.h, cache-internal.h and common/'s;
     a FOO-internal.h is included by its own component's files alone; and
     no file of net/ includes a header of cache/ (a connection receives a
     WRITE into cache pages through the export);
  7. only backend/ calls a backend's operations (b->ops->...): everyone
     else goes through backend.h's door.

Usage: check-layers.py DAEMON_DIR         check, print the component table
       check-layers.py --table DAEMON_DIR the table alone (the one
                                          docs/architecture.md embeds)
       check-layers.py --doc DOC DAEMON_DIR
                                          DOC embeds that table, and its
                                          module table names each file of
                                          the tree once, in its component
       check-layers.py --stats DAEMON_DIR the include graph's depth (its
                                          longest chain) and arrows, between
                                          files, modules and components
       check-layers.py --self-test        the checker catches what it should
Exit 0 if every rule holds, 1 (naming each break) if not.
"""
import difflib
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
OPS_CALL = re.compile(r'->ops->')
DEP = re.compile(r'\b([A-Za-z]\w*)_dep\b')
TOP = 'wbd'          # the component of daemon/ itself: the program
BOTTOM = 'common'    # common/, beside daemon/
CACHE_CORE = ('cache.c', 'wbuf.c')   # the cache's own files (rule 6) ...
CACHE_HEADERS = ('cache.h', 'cache-internal.h')  # ... and what they include
TABLE_BEGIN = '<!-- component table: begin -->'
TABLE_END = '<!-- component table: end -->'


class Tree:
    """The components, their files and what each file includes."""

    def __init__(self, d):
        self.daemon = os.path.normpath(d)
        self.comps = {}    # component -> folder, as the docs write it
        self.files = {}    # path (as the docs write it) -> component
        self.text = {}     # path -> its text
        self.build = {}    # component -> its meson.build's text, or None
        common = os.path.join(os.path.dirname(self.daemon), 'common')
        self._add(TOP, self.daemon, 'daemon/', recurse=False)
        for e in sorted(os.listdir(self.daemon)):
            sub = os.path.join(self.daemon, e)
            if os.path.isdir(sub) and not e.startswith('.'):
                self._add(e, sub, f'daemon/{e}/', recurse=True)
        if os.path.isdir(common):
            self._add(BOTTOM, common, 'common/', recurse=True)
        self.includes = {}  # path -> [included path], in the tree only
        by_name = {}
        for p in self.files:
            by_name.setdefault(os.path.basename(p), []).append(p)
        self.by_name = by_name
        for p, text in self.text.items():
            out = []
            for inc in INCLUDE.findall(text):
                here = os.path.normpath(os.path.join(os.path.dirname(p), inc))
                if here in self.files:
                    out.append(here)
                elif os.path.basename(inc) in by_name:
                    # several: rule 5 fails, the first is taken meanwhile
                    out.append(sorted(by_name[os.path.basename(inc)])[0])
            self.includes[p] = sorted(set(out) - {p})
        self.deps = {c: self._deps(c) for c in self.comps}

    def _add(self, comp, folder, shown, recurse):
        self.comps[comp] = shown
        mb = os.path.join(folder, 'meson.build')
        self.build[comp] = (open(mb, encoding='utf-8').read()
                            if os.path.exists(mb) else None)
        for root, dirs, names in os.walk(folder):
            dirs.sort()
            if not recurse:
                dirs[:] = []
            for n in sorted(names):
                if n.endswith(('.c', '.h')):
                    full = os.path.join(root, n)
                    rel = shown + os.path.relpath(full, folder)
                    self.files[rel] = comp
                    self.text[rel] = open(full, encoding='utf-8').read()

    def _deps(self, comp):
        """The components COMP's meson.build names (FOO_dep), but itself."""
        text = self.build[comp] or ''
        text = re.sub(r'#.*', '', text)
        names = set(DEP.findall(text))
        return sorted((names & set(self.comps)) - {comp})

    def may_include(self, comp):
        """Every component COMP stands on, directly or through another."""
        seen, todo = set(), list(self.deps[comp])
        while todo:
            c = todo.pop()
            if c not in seen:
                seen.add(c)
                todo.extend(self.deps[c])
        seen.discard(comp)
        return seen

    def order(self):
        """Components bottom to top: by height over what they stand on,
        then by name."""
        h = heights({c: set(self.deps[c]) for c in self.comps})
        return sorted(self.comps, key=lambda c: (h[c], c != BOTTOM, c))

    def module(self, p):
        return os.path.splitext(p)[0]

    def module_graph(self):
        """Module -> the modules it includes (a .c and its .h as one)."""
        mods = {}
        for p, incs in self.includes.items():
            mods.setdefault(self.module(p), set()).update(
                self.module(q) for q in incs
                if self.module(q) != self.module(p))
        return mods

    def component_graph(self):
        """Component -> the components its files include."""
        comps = {c: set() for c in self.comps}
        for p, incs in self.includes.items():
            comps[self.files[p]].update(self.files[q] for q in incs
                                        if self.files[q] != self.files[p])
        return comps


def cycles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
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
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def heights(graph):
    """Each node's height: 0 for one that reaches nothing (a node on a
    cycle counts the cycle once)."""
    height = {}

    def h(v, seen=()):
        if v in height:
            return height[v]
        if v in seen:
            return 0
        height[v] = 1 + max((h(w, seen + (v,)) for w in graph.get(v, ())
                             if w != v), default=-1)
        return height[v]

    for v in graph:
        h(v)
    return height


def longest_chain(graph):
    """The longest path of GRAPH (which has no cycle), as its nodes."""
    best = {}

    def walk(v):
        if v not in best:
            tails = [walk(w) for w in sorted(graph.get(v, ())) if w != v]
            best[v] = [v] + max(tails, key=len, default=[])
        return best[v]

    sys.setrecursionlimit(10000)
    return max((walk(v) for v in sorted(graph)), key=len, default=[])


def check(d):
    t = Tree(d)
    errors = []
    # 1. each folder a library
    for c in t.comps:
        if c == TOP:
            continue
        text = t.build[c]
        where = t.comps[c] + 'meson.build'
        if text is None:
            errors.append(f'{where}: missing (a component folder builds '
                          'a static library)')
            continue
        if 'static_library(' not in text:
            errors.append(f'{where}: builds no static_library')
        if not re.search(rf'^{re.escape(c)}_dep\s*=\s*declare_dependency\(',
                         text, re.M):
            errors.append(f'{where}: declares no {c}_dep = '
                          'declare_dependency(...)')
    # 2. components one way
    for cyc in cycles({c: set(t.deps[c]) for c in t.comps}):
        errors.append('components that stand on each other in a cycle: ' +
                      ', '.join(cyc))
    # 3. no wrong-way include
    for p, incs in sorted(t.includes.items()):
        a = t.files[p]
        may = t.may_include(a)
        for q in incs:
            if t.files[q] not in may | {a}:
                errors.append(f'wrong-way include: {p} includes {q} '
                              f'({a} may include: '
                              f'{", ".join(ordered(t, may)) or "nothing"})')
    # 4. no cycle between files, nor between modules
    for cyc in cycles({p: set(q) for p, q in t.includes.items()}):
        errors.append('include cycle among files: ' + ', '.join(cyc))
    for cyc in cycles(t.module_graph()):
        errors.append('include cycle among modules (a .c and its .h): ' +
                      ', '.join(cyc))
    # 5. one file per header name
    for name, paths in sorted(t.by_name.items()):
        if name.endswith('.h') and len(paths) > 1:
            errors.append(f'{name} is in more than one folder: ' +
                          ', '.join(sorted(paths)))
    # 6. the seams
    for p, text in t.text.items():
        base = os.path.basename(p)
        names = [os.path.basename(q) for q in t.includes[p]]
        if base == 'export.c':
            for bad in ('conn.h', 'ioloop.h'):
                if bad in names:
                    errors.append(f'{p} includes {bad}')
        if base in CACHE_CORE:
            extra = [q for q in t.includes[p] if t.files[q] != BOTTOM and
                     os.path.basename(q) not in CACHE_HEADERS]
            if extra:
                errors.append(f'{p} includes headers of the tree: ' +
                              ', '.join(extra))
        if t.files[p] == 'net':
            for q in t.includes[p]:
                if t.files.get(q) == 'cache':
                    errors.append(f'{p} includes {q} (net reaches the '
                                  'cache through the export)')
        for q in t.includes[p]:
            if q.endswith('-internal.h') and t.files[q] != t.files[p]:
                errors.append(f'{p} includes {q}, private to '
                              f'{t.files[q]}')
    # 7. one door to the backends
    for p, text in sorted(t.text.items()):
        if t.files[p] == 'backend':
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if OPS_CALL.search(line):
                errors.append(f'{p}:{n}: calls a backend operation '
                              'directly (use backend.h)')
    return t, errors


def ordered(t, comps):
    """COMPS from the top of the order down."""
    return [c for c in reversed(t.order()) if c in comps]


def file_list(t, comp):
    """COMP's files, a .c and its .h written once as x.[ch]."""
    names = sorted(os.path.relpath(p, t.comps[comp]) if comp != TOP
                   else p[len('daemon/'):]
                   for p in t.files if t.files[p] == comp)
    out, seen = [], set(names)
    for n in names:
        stem, ext = os.path.splitext(n)
        if ext == '.h' and stem + '.c' in seen:
            continue
        if ext == '.c' and stem + '.h' in seen:
            out.append(f'`{stem}.[ch]`')
        else:
            out.append(f'`{n}`')
    return ' '.join(out)


def table(t):
    """The component table, bottom to top, as docs/architecture.md has it."""
    lines = ['| component | folder | files | may include |',
             '|---|---|---|---|']
    for c in t.order():
        may = ', '.join(ordered(t, t.may_include(c))) or '—'
        lines.append(f'| {c} | `{t.comps[c]}` | {file_list(t, c)} | {may} |')
    return '\n'.join(lines) + '\n'


def stats(t):
    """Depth (files on the longest chain) and arrows of the include graph
    between files, between modules and between components."""
    out = []
    for name, g in (('files', {p: set(q) for p, q in t.includes.items()}),
                    ('modules', t.module_graph()),
                    ('components', t.component_graph())):
        arrows = sum(len(v) for v in g.values())
        if cycles(g):
            out.append(f'{name}: {len(g)} {name}, {arrows} arrows, '
                       'depth: none (a cycle)')
            continue
        chain = longest_chain(g)
        out.append(f'{name}: {len(g)} {name}, {arrows} arrows, depth '
                   f'{len(chain)} ({" -> ".join(chain)})')
    return '\n'.join(out) + '\n'


def doc_check(t, doc_path):
    """DOC embeds the table; its module table names each file once."""
    errors = []
    doc = open(doc_path, encoding='utf-8').read()
    b, e = doc.find(TABLE_BEGIN), doc.find(TABLE_END)
    if b < 0 or e < b:
        return [f'{doc_path}: no "{TABLE_BEGIN}" ... "{TABLE_END}"']
    body = doc[b + len(TABLE_BEGIN):e].strip('\n') + '\n'
    want = table(t)
    if body != want:
        diff = difflib.unified_diff(body.splitlines(True),
                                    want.splitlines(True),
                                    f'{doc_path} (embedded)',
                                    'check-layers.py --table')
        errors.append(f'{doc_path}: the component table differs from what '
                      'check-layers.py --table prints:\n' + ''.join(diff))
    errors += module_table_check(t, doc, doc_path)
    return errors


def module_table_check(t, doc, doc_path):
    """The module table (| component | file | owns | runs on |) names each
    .c of the tree, and each .h without one, exactly once, under the
    component whose folder holds it."""
    errors = []
    m = re.search(r'^\| component \| file \| owns \| runs on \|\n'
                  r'((?:\|.*\n)+)', doc, re.M)
    if not m:
        return [f'{doc_path}: no module table '
                '(| component | file | owns | runs on |)']
    named = {}
    comp = None
    for row in m.group(1).splitlines()[1:]:
        cells = [c.strip() for c in row.strip().strip('|').split('|')]
        if len(cells) < 2:
            continue
        if cells[0]:
            comp = cells[0]
        paths = re.findall(r'`([^`]+)`', cells[1])
        if not paths or not paths[0].startswith(('daemon/', 'common/')):
            continue
        first = paths[0]
        for p in [first] + [os.path.join(os.path.dirname(first), q)
                            for q in paths[1:]]:
            named[p] = named.get(p, 0) + 1
            if p not in t.files:
                errors.append(f'{doc_path}: the module table names {p}, '
                              'which is not in the tree')
            elif t.files[p] != comp:
                errors.append(f'{doc_path}: the module table has {p} '
                              f'under {comp}, its folder is '
                              f'{t.files[p]}\'s')
    for p, n in sorted(named.items()):
        if n > 1:
            errors.append(f'{doc_path}: the module table names {p} '
                          f'{n} times')
    for p in sorted(t.files):
        stem, ext = os.path.splitext(p)
        wanted = ext == '.c' or stem + '.c' not in t.files
        if wanted and p not in named:
            errors.append(f'{doc_path}: the module table does not name {p}')
    return errors


def write(d, name, text):
    path = os.path.join(d, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w', encoding='utf-8') as f:
        f.write(text)


def lib(name, deps):
    return (f"{name}_lib = static_library('{name}', 'x.c')\n"
            f"{name}_dep = declare_dependency(link_with : {name}_lib,\n"
            f"  dependencies : [{', '.join(d + '_dep' for d in deps)}])\n")


SELF_BASE = {
    'common/meson.build': lib('common', []),
    'common/clock.h': '',
    'daemon/meson.build': "executable('wbd', 'main.c', "
                          "dependencies : [net_dep])\n",
    'daemon/main.c': '#include "conn.h"\n',
    'daemon/cache/meson.build': lib('cache', ['common']),
    'daemon/cache/cache.h': '',
    'daemon/cache/cache.c': '#include "cache.h"\n#include "clock.h"\n',
    'daemon/io/meson.build': lib('io', ['cache']),
    'daemon/io/job.h': '',
    'daemon/io/pool.h': '#include "job.h"\n',
    'daemon/io/pool.c': '#include "pool.h"\n#include "cache.h"\n',
    'daemon/export/meson.build': lib('export', ['io']),
    'daemon/export/export.h': '',
    'daemon/export/export.c': '#include "export.h"\n#include "pool.h"\n',
    'daemon/backend/meson.build': lib('backend', []),
    'daemon/backend/backend.h': '',
    'daemon/backend/backend.c': 'int g(struct backend *b)'
                                '{ return b->ops->flush(b); }\n',
    'daemon/net/meson.build': lib('net', ['export']),
    'daemon/net/conn.h': '',
    'daemon/net/conn.c': '#include "conn.h"\n#include "export.h"\n'
                         '#include "job.h"\n',
}
SELF_DOC_MODULES = '''
| component | file | owns | runs on |
|---|---|---|---|
| common | `common/clock.h` | x | y |
| cache | `daemon/cache/cache.c` | x | y |
| io | `daemon/io/pool.c` | x | y |
| | `daemon/io/job.h` | x | y |
| export | `daemon/export/export.c` | x | y |
| backend | `daemon/backend/backend.c`, `backend.h` | x | y |
| net | `daemon/net/conn.c` | x | y |
| wbd | `daemon/main.c` | x | y |
'''


def self_test():
    """A clean tree passes; each kind of break is caught."""
    failures = 0
    PRIVATE = '#include "cache.h"\n#include "cache-internal.h"\n'
    cases = {
        'clean': ({}, False),
        'wrong-way': ({'daemon/cache/cache.c': '#include "cache.h"\n'
                                               '#include "conn.h"\n'}, True),
        'wrong-way-header': ({'daemon/io/job.h': '#include "export.h"\n'},
                             True),
        'beside-not-below': ({'daemon/backend/backend.h':
                              '#include "cache.h"\n'}, True),
        'through-below': ({'daemon/export/export.h':
                           '#include "cache.h"\n'}, False),
        'net-cache': ({'daemon/net/conn.c': '#include "conn.h"\n'
                                            '#include "cache.h"\n'}, True),
        'file-cycle': ({'daemon/io/job.h': '#include "pool.h"\n'}, True),
        'module-cycle': ({'daemon/io/job.c': '#include "pool.h"\n',
                          'daemon/io/pool.c': '#include "job.h"\n'}, True),
        'component-cycle': ({'daemon/cache/meson.build':
                             lib('cache', ['common', 'net'])}, True),
        'no-library': ({'daemon/cache/meson.build': '# nothing\n'}, True),
        'no-meson': ({'daemon/extra/x.c': ''}, True),
        'same-name': ({'daemon/net/pool.h': ''}, True),
        'export-ioloop': ({'daemon/export/ioloop.h': '',
                           'daemon/export/export.c': '#include "export.h"\n'
                           '#include "ioloop.h"\n'}, True),
        'cache-up': ({'daemon/cache/prefault.h': '',
                      'daemon/cache/cache.c': '#include "cache.h"\n'
                                              '#include "prefault.h"\n'},
                     True),
        'cache-private': ({'daemon/cache/cache-internal.h': '',
                           'daemon/cache/wbuf.c': PRIVATE,
                           'daemon/cache/cache.c': PRIVATE}, False),
        'internal-outside': ({'daemon/cache/cache-internal.h': '',
                              'daemon/io/pool.c': '#include "pool.h"\n'
                              '#include "cache-internal.h"\n'}, True),
        'ops': ({'daemon/export/export.c': '#include "export.h"\n'
                 'int f(struct backend *b)'
                 '{ return b->ops->flush(b); }\n'}, True),
    }
    for name, (change, should_fail) in cases.items():
        with tempfile.TemporaryDirectory() as d:
            for f, text in {**SELF_BASE, **change}.items():
                write(d, f, text)
            _, errors = check(os.path.join(d, 'daemon'))
            if bool(errors) != should_fail:
                print(f'self-test {name}: expected '
                      f'{"a failure" if should_fail else "a pass"}, '
                      f'got {errors or "a pass"}')
                failures += 1
    # The order, the table and the figures of the clean tree.
    with tempfile.TemporaryDirectory() as d:
        for f, text in SELF_BASE.items():
            write(d, f, text)
        t, _ = check(os.path.join(d, 'daemon'))
        got = t.order()
        want = ['common', 'backend', 'cache', 'io', 'export', 'net', 'wbd']
        if got != want:
            print(f'self-test order: expected {want}, got {got}')
            failures += 1
        row = ('| net | `daemon/net/` | `conn.[ch]` | '
               'export, io, cache, common |')
        if row not in table(t).splitlines():
            print(f'self-test table: no row {row!r} in\n{table(t)}')
            failures += 1
        s = stats(t)
        for want in ('files: 13 files, 11 arrows, depth 3 (daemon/export/'
                     'export.c -> daemon/io/pool.h -> daemon/io/job.h)',
                     'modules: 8 modules, 7 arrows, depth 6',
                     'components: 7 components, 6 arrows, depth 6 '
                     '(wbd -> net -> export -> io -> cache -> common)'):
            if want not in s:
                print(f'self-test stats: no {want!r} in\n{s}')
                failures += 1
        # The document: the right table and module table pass; a table
        # out of date, a file named twice, one missing, one under the
        # wrong component fail.
        good = (f'# x\n{TABLE_BEGIN}\n{table(t)}{TABLE_END}\n'
                + SELF_DOC_MODULES)
        docs = {
            'doc-clean': (good, False),
            'doc-stale': (good.replace('export, io, cache', 'io, cache'),
                          True),
            'doc-twice': (good.replace(
                '| | `daemon/io/job.h` | x | y |\n',
                '| | `daemon/io/job.h` | x | y |\n'
                '| | `daemon/io/pool.c` | x | y |\n'), True),
            'doc-missing': (good.replace(
                '| | `daemon/io/job.h` | x | y |\n', ''), True),
            'doc-wrong-component': (good.replace(
                '| io | `daemon/io/pool.c`', '| cache | `daemon/io/pool.c`'),
                True),
            'doc-no-such-file': (good.replace('`backend.h`', '`backend2.h`'),
                                 True),
        }
        for name, (text, should_fail) in docs.items():
            write(d, 'arch.md', text)
            errors = doc_check(t, os.path.join(d, 'arch.md'))
            if bool(errors) != should_fail:
                print(f'self-test {name}: expected '
                      f'{"a failure" if should_fail else "a pass"}, '
                      f'got {errors or "a pass"}')
                failures += 1
    print('self-test: ' + ('FAILED' if failures else 'ok'))
    return 1 if failures else 0


def main():
    args = sys.argv[1:]
    if args == ['--self-test']:
        return self_test()
    if len(args) == 2 and args[0] == '--table':
        t, _ = check(args[1])
        sys.stdout.write(table(t))
        return 0
    if len(args) == 2 and args[0] == '--stats':
        sys.stdout.write(stats(Tree(args[1])))
        return 0
    if len(args) == 3 and args[0] == '--doc':
        t, _ = check(args[2])
        errors = doc_check(t, args[1])
        for e in errors:
            print('FAIL: ' + e)
        if not errors:
            print(f'{args[1]}: the component table is what check-layers.py '
                  'prints; the module table names each file once')
        return 1 if errors else 0
    if len(args) != 1 or args[0].startswith('--'):
        print(__doc__[__doc__.index('Usage:'):].split('\n\n')[0],
              file=sys.stderr)
        return 2
    t, errors = check(args[0])
    sys.stdout.write(table(t))
    for e in errors:
        print('FAIL: ' + e)
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
