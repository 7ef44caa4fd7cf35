#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Every member of every answer the control socket gives -- wbctl --json
# for each command, an error, a flush's progress lines, a remote device's
# state and an export waiting for its remote -- is documented in wbctl(8)
# or docs/control-protocol.md.  The members are collected from a running
# daemon's answers, so a new one cannot be forgotten.
source "${SRCDIR:?SRCDIR must name tests/ctl}/lib-ctl.sh"
: "${DOCDIR:?DOCDIR must name docs/}"
need_python_nbd
HERE=$SRCDIR/../docs

add_export disk0 16M rw "local disk"
if command -v nbdkit >/dev/null; then
	KIT=$T/kit.sock
	nbdkit -f -U "$KIT" memory 16M >>"$T/nbdkit.log" 2>&1 &
	_PIDS+=("$!")
	for ((i = 0; i < 100; i++)); do [[ -S $KIT ]] && break; sleep 0.1; done
	_EXPORTS+=("  { name = \"remote\"; backing = \"nbd+unix:///?socket=$KIT\"; }")
	_EXPORTS+=("  { name = \"late\"; backing = \"nbd+unix:///?socket=$T/absent.sock\"; }")
else
	log "nbdkit is not installed: remote members not collected"
fi
start_wbd

j=$T/json
mkdir "$j"
"$PYTHON" - "$(uri_unix)" <<'PY' || fail "could not write through libnbd"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(b"\x11" * (1 << 20), 0)
h.shutdown()
PY
for cmd in version status exports tune reload; do
	expect_exit 0 wbctl --json "$cmd"
	printf '%s\n' "$OUT" >"$j/$cmd"
done
expect_exit 0 wbctl --json tune dirty_expire_centisecs=2000
printf '%s\n' "$OUT" >"$j/tune-set"
expect_exit 0 wbctl --json flush --no-wait
printf '%s\n' "$OUT" >"$j/flush-queued"
expect_exit 5 wbctl --json tune no_such_key=1
printf '%s\n' "$OUT" >"$j/error"
# A flush with progress, as a client of the protocol asks for it.
"$SYSPY" - "$CTL" >"$j/flush-progress" <<'PY' || fail "raw flush failed"
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b'{"v": 1, "cmd": "flush", "progress": true}\n')
buf = b""
while b'"ok"' not in buf:
    data = s.recv(65536)
    if not data:
        break
    buf += data
sys.stdout.write(buf.decode())
PY
grep -q '"progress"' "$j/flush-progress" || fail "no progress line: $(cat "$j/flush-progress")"

"$SYSPY" "$HERE/json-members.py" "$j"/* >"$T/members"
(( $(wc -l <"$T/members") > 50 )) || fail "too few members: $(cat "$T/members")"
# Documented: named as a member, not merely the word somewhere (a member
# called "state", "name" or "mode" would match any prose): in
# control-protocol.md quoted ("NAME", as in its JSON), as a code span of
# its own (`NAME`) or an item of a code span's {a, b, c} list; in wbctl(8)
# in bold (.B NAME, .BR NAME ..., \fBNAME\fP) or quoted (\(dqNAME\(dq).
"$SYSPY" - "$T/members" "$DOCDIR/control-protocol.md" "$DOCDIR/wbctl.8" \
	>"$T/missing" <<'PY' || fail "could not check the members"
import re, sys
members = open(sys.argv[1]).read().split()
md = open(sys.argv[2]).read()
man = open(sys.argv[3]).read()
# The code of the markdown: fenced blocks and inline spans.
code = re.findall(r"```.*?```", md, re.S)
code += re.findall(r"`([^`]+)`", re.sub(r"```.*?```", "", md, flags=re.S))
for m in members:
    e = re.escape(m)
    if ('"%s"' % m in md or "`%s`" % m in md or
            any(re.search(r"[{,]\s*%s\s*[,}:]" % e, c) for c in code)):
        continue
    if (re.search(r"^\.(B|BR|BI) +\"?%s\"?(?=[\s,;.)]|$)" % e, man, re.M) or
            re.search(r"\\fB%s\\f[PR]" % e, man) or
            "\\(dq%s\\(dq" % m in man):
        continue
    print(m)
PY
mapfile -t missing <"$T/missing"
((${#missing[@]} == 0)) ||
	fail "members documented in neither wbctl(8) nor control-protocol.md: ${missing[*]}"
log "$(wc -l <"$T/members") JSON members, each documented"
