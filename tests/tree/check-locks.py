#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""check-locks.py - the lock table of docs/architecture.md against the
code's locks.

A lock is a pthread_mutex_t, pthread_rwlock_t or pthread_spinlock_t that
the code declares (a pointer to one is not a lock): a struct's field,
written STRUCT.FIELD (a field of an unnamed struct or union inside a named
one counts as the named one's); a variable at file scope, written NAME; or
one on a function's stack, written FUNCTION().NAME.  Each row of the table
under "### Locks" (| # | lock | protects | taken by |) names its lock as the
first `code` of its lock cell, and says "rwlock" or "spinlock" when it is
one.  The table and the code must name the same locks: a lock of the code
missing from the table fails, and so does a row that names no lock of the
code.

Usage: check-locks.py DOC DIR...      check DOC's table against DIRs' C
       check-locks.py --self-test     the checker catches what it should
Exit 0 if they agree, 1 (naming each difference) if not.
"""
import os
import re
import sys
import tempfile

LOCK_TYPE = re.compile(r'\bpthread_(mutex|rwlock|spinlock)_t\b')
HEADER = re.compile(r'^\|\s*#\s*\|\s*lock\s*\|', re.M)


def strip(text):
    """TEXT without comments, strings and character constants (each
    replaced by spaces, newlines kept) nor preprocessor lines."""
    out = re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|'
                 r"'(?:\\.|[^'\\\n])*'",
                 lambda m: re.sub(r'[^\n]', ' ', m.group(0)), text,
                 flags=re.S)
    return re.sub(r'^[ \t]*#(?:[^\n]*\\\n)*[^\n]*', lambda m: re.sub(
        r'[^\n]', ' ', m.group(0)), out, flags=re.M)


def locks_in(text, where):
    """[(id, kind, line)] of the locks TEXT declares."""
    code = strip(text)
    found = []
    scopes = []          # ('struct', NAME) / ('anon',) / ('func', NAME) /
    start = 0            # ('block',); start of the current statement
    depth_paren = 0
    for i, ch in enumerate(code):
        if ch == '(':
            depth_paren += 1
        elif ch == ')':
            depth_paren -= 1
        elif ch == '{':
            head = code[start:i]
            m = re.search(r'\b(?:struct|union)\s+(\w+)\s*$', head)
            if m:
                scopes.append(('struct', m.group(1)))
            elif re.search(r'\b(?:struct|union)\s*$', head):
                scopes.append(('anon',))
            elif not scopes and '(' in head and '=' not in head:
                name = re.search(r'(\w+)\s*\(', head)
                scopes.append(('func', name.group(1) if name else '?'))
            else:
                scopes.append(('block',))
            start = i + 1
        elif ch == '}':
            if scopes:
                scopes.pop()
            start = i + 1
        elif ch == ';' and depth_paren == 0:
            stmt = code[start:i]
            m = LOCK_TYPE.search(stmt)
            if m and '(' not in stmt[:m.start()]:
                line = code.count('\n', 0, start + m.start()) + 1
                for name in declarators(stmt[m.end():]):
                    found.append((lock_id(scopes, name), m.group(1),
                                  f'{where}:{line}'))
            start = i + 1
    return found


def declarators(rest):
    """The names declared after the type: not pointers, not parameters."""
    names = []
    for part in re.sub(r'\(.*', '', rest.split('=')[0]).split(','):
        m = re.match(r'\s*(\w+)', part)
        if m:
            names.append(m.group(1))
    return names


def lock_id(scopes, name):
    funcs = [s[1] for s in scopes if s[0] == 'func']
    if funcs:
        return f'{funcs[0]}().{name}'
    structs = [s[1] for s in scopes if s[0] == 'struct']
    if structs:
        return f'{structs[-1]}.{name}'
    return name


def code_locks(dirs):
    """id -> (kind, where) over every .c and .h under DIRS."""
    out = {}
    for d in dirs:
        for root, subdirs, files in os.walk(d):
            subdirs.sort()
            for f in sorted(files):
                if not f.endswith(('.c', '.h')):
                    continue
                path = os.path.join(root, f)
                shown = os.path.relpath(path, os.path.dirname(
                    os.path.normpath(d)))
                text = open(path, encoding='utf-8').read()
                for ident, kind, where in locks_in(text, shown):
                    out.setdefault(ident, (kind, where))
    return out


def doc_locks(doc):
    """id -> the row's lock cell, from the table under "### Locks"."""
    m = re.search(r'^### Locks\n(.*?)(?=^#|\Z)', doc, re.M | re.S)
    if not m:
        return None
    section = m.group(1)
    h = HEADER.search(section)
    if not h:
        return None
    rows, out = section[h.start():].splitlines(), {}
    for row in rows[2:]:
        if not row.startswith('|'):
            break
        cells = [c.strip() for c in row.strip().strip('|').split('|')]
        names = re.findall(r'`([^`]+)`', cells[1]) if len(cells) > 1 else []
        key = names[0] if names else cells[1] if len(cells) > 1 else row
        out.setdefault(key, []).append(cells[1] if len(cells) > 1 else row)
    return out


def check(doc_path, dirs):
    doc = open(doc_path, encoding='utf-8').read()
    code = code_locks(dirs)
    table = doc_locks(doc)
    if table is None:
        return code, [f'{doc_path}: no lock table under "### Locks" '
                      '(| # | lock | protects | taken by |)']
    errors = []
    for ident, (kind, where) in sorted(code.items()):
        if ident not in table:
            errors.append(f'{ident} ({where}, a {kind}) is not in the lock '
                          f'table of {doc_path}')
        elif kind != 'mutex' and not any(kind in c for c in table[ident]):
            errors.append(f'{doc_path}: the row of {ident} does not say it '
                          f'is a {kind}')
    for ident, cells in sorted(table.items()):
        if ident not in code:
            errors.append(f'{doc_path}: the lock table names {ident}, which '
                          'is no lock of the code')
        if len(cells) > 1:
            errors.append(f'{doc_path}: the lock table names {ident} '
                          f'{len(cells)} times')
    return code, errors


SELF_CODE = {
    'd/a.h': 'struct tab {\n\tpthread_mutex_t lock; /* pthread_mutex_t x; */'
             '\n\tstruct { pthread_rwlock_t rw; } in;\n'
             '\tpthread_mutex_t *not_a_lock;\n};\n'
             'void lock_init(pthread_mutex_t *m);\n',
    'd/b.c': '#include "a.h"\nstatic pthread_mutex_t servers_lock = '
             'PTHREAD_MUTEX_INITIALIZER;\n'
             'static const char *s = "pthread_mutex_t fake;";\n'
             'void\ndrain(struct tab *t)\n{\n\tpthread_mutex_t lock = '
             'PTHREAD_MUTEX_INITIALIZER;\n\tif (t) {\n\t\t'
             'pthread_spinlock_t spin;\n\t}\n}\n',
}
SELF_DOC = '''# x

### Locks

| # | lock | protects | taken by |
|---|---|---|---|
| 1 | `servers_lock` (b.c) | a | b |
| 2 | `drain().lock` (on its stack) | a | b |
| 3 | `tab.lock` | a | b |
| 4 | `tab.rw` (rwlock) | a | b |
| 5 | `drain().spin` (a spinlock) | a | b |

More text.
'''


def self_test():
    failures = 0
    cases = {
        'clean': (SELF_DOC, {}, False),
        'row-missing': (SELF_DOC.replace('| 3 | `tab.lock` | a | b |\n', ''),
                        {}, True),
        'row-without-lock': (SELF_DOC.replace(
            '| 5 |', '| 6 | `tab.gone` | a | b |\n| 5 |'), {}, True),
        'row-twice': (SELF_DOC.replace(
            '| 5 |', '| 6 | `tab.lock` | a | b |\n| 5 |'), {}, True),
        'rwlock-unsaid': (SELF_DOC.replace('`tab.rw` (rwlock)', '`tab.rw`'),
                          {}, True),
        'new-lock': (SELF_DOC, {'d/c.c': 'struct pool {\n\tint n;\n'
                                         '\tpthread_mutex_t qlock;\n};\n'},
                     True),
        'no-table': ('# x\n', {}, True),
    }
    for name, (doc, extra, should_fail) in cases.items():
        with tempfile.TemporaryDirectory() as d:
            for f, text in {**SELF_CODE, **extra}.items():
                os.makedirs(os.path.join(d, os.path.dirname(f)),
                            exist_ok=True)
                with open(os.path.join(d, f), 'w', encoding='utf-8') as fh:
                    fh.write(text)
            with open(os.path.join(d, 'doc.md'), 'w', encoding='utf-8') as fh:
                fh.write(doc)
            code, errors = check(os.path.join(d, 'doc.md'),
                                 [os.path.join(d, 'd')])
            if bool(errors) != should_fail:
                print(f'self-test {name}: expected '
                      f'{"a failure" if should_fail else "a pass"}, '
                      f'got {errors or "a pass"}')
                failures += 1
            if name == 'clean':
                want = {'tab.lock', 'tab.rw', 'servers_lock', 'drain().lock',
                        'drain().spin'}
                if set(code) != want:
                    print(f'self-test locks: expected {sorted(want)}, '
                          f'got {sorted(code)}')
                    failures += 1
    print('self-test: ' + ('FAILED' if failures else 'ok'))
    return 1 if failures else 0


def main():
    args = sys.argv[1:]
    if args == ['--self-test']:
        return self_test()
    if len(args) < 2 or args[0].startswith('--'):
        print(__doc__[__doc__.index('Usage:'):].split('\n\n')[0],
              file=sys.stderr)
        return 2
    code, errors = check(args[0], args[1:])
    for ident, (kind, where) in sorted(code.items(),
                                       key=lambda kv: kv[1][1]):
        print(f'{ident:32} {kind:8} {where}')
    for e in errors:
        print('FAIL: ' + e)
    if not errors:
        print(f'{len(code)} locks in the code, each a row of the lock table '
              f'of {args[0]}')
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
