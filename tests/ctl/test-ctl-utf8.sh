#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Control replies stay valid JSON whatever the request's strings: an
# unknown command name longer than the 64 bytes quoted back is cut on a
# UTF-8 character boundary, so the reply is EPROTO naming it, not a false
# ENOMEM (json_string refused the cut character before).
source "${SRCDIR:-$(dirname "$0")}/lib-ctl.sh"

add_export disk0 16M rw
start_wbd

"$SYSPY" - "$CTL" <<'PY' || fail "see above"
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
f = s.makefile("rwb")
for name in ["x" + "\u00e9" * 40, "xx" + "\u20ac" * 30,
             "x" + "\U0001F600" * 20]:
    f.write(json.dumps({"v": 1, "cmd": name}).encode() + b"\n")
    f.flush()
    ans = json.loads(f.readline())
    if ans.get("code") != "EPROTO":
        sys.exit("FAIL: command %r: expected EPROTO, got %r" % (name, ans))
    quoted = ans["error"].split('"')[1]
    if not name.startswith(quoted) or len(quoted.encode()) > 64:
        sys.exit("FAIL: command %r: quoted back as %r" % (name, quoted))
print("PASS")
PY
stop_wbd
