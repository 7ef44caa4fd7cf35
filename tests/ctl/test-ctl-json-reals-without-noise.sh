#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The reals of a status answer (a device's writeback_cpu_seconds and
# writeback_cpu_share) carry at most 6 significant digits, both on the
# control socket and in "wbctl --json status": no 17-digit expansion of a
# double (0.30000000000000004, 0.0012345670000000001).  Data is written
# and flushed first, so that writeback has used some CPU to report.
source "${SRCDIR:-$(dirname "$0")}/lib-ctl.sh"
need_python_nbd

add_export disk0 32M rw
add_export disk1 16M rw
start_wbd
"$PYTHON" - "$(uri_unix disk0)" "$(uri_unix disk1)" <<'PY' || fail "could not write through libnbd"
import nbd, os, sys
for uri in sys.argv[1:]:
    h = nbd.NBD()
    h.connect_uri(uri)
    for off in range(0, 16 << 20, 1 << 20):
        h.pwrite(os.urandom(1 << 20), off)
    h.flush()
    h.shutdown()
PY

# check_reals FILE WHAT: FILE, one JSON document, has a real above 0 and
# none with more than 6 significant digits.
check_reals() {
	"$SYSPY" - "$1" "$2" <<'PY' || fail "see above"
import json, re, sys
path, what = sys.argv[1], sys.argv[2]
reals = []
json.load(open(path), parse_float=lambda s: reals.append(s) or float(s))
def digits(s):
    mantissa = re.split(r"[eE]", s.lstrip("-"))[0].replace(".", "")
    return len(mantissa.strip("0")) or 1
if not any(float(r) > 0 for r in reals):
    sys.exit("FAIL: %s: no real above 0 to check: %r" % (what, reals))
long = [r for r in reals if digits(r) > 6]
if long:
    sys.exit("FAIL: %s: reals with more than 6 significant digits: %s"
             % (what, ", ".join(long)))
print("%s: reals %s" % (what, ", ".join(reals)))
PY
}

# Straight from the control socket.
"$SYSPY" - "$CTL" >"$T/raw.json" <<'PY' || fail "no status answer"
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(b'{"v": 1, "cmd": "status"}\n')
buf = b""
while not buf.endswith(b"\n"):
    data = s.recv(65536)
    if not data:
        break
    buf += data
sys.stdout.write(buf.decode())
PY
check_reals "$T/raw.json" "the control socket's status answer"

# Through wbctl, which parses the answer and prints it again.
expect_exit 0 wbctl --json status
printf '%s\n' "$OUT" >"$T/status.json"
check_reals "$T/status.json" "wbctl --json status"
check_schema status "$T/status.json"
assert_alive
