#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Malformed and hostile input, sent over raw sockets by nbdraw.py, gets the
# exact reply the NBD protocol prescribes (or a clean disconnect where it
# allows one), while a well-behaved libnbd client keeps writing and reading
# correctly before and after every case.  At the end the daemon is still
# running and its log holds no sanitizer report.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

add_export disk0 64M rw "scratch disk"
add_export ro 16M ro
start_wbd

"$PYTHON" "$SRCDIR/nbdraw.py" --unix "$SOCK" --tcp "$PORT" \
	--export disk0 --size $((64 << 20)) --ro-export ro ||
	fail "nbdraw.py found wrong replies (see above)"

assert_alive
# The daemon still serves new clients normally.
"$PYTHON" - "$(uri_unix disk0)" <<'PY' || fail "a new client after the hostile ones failed"
import nbd, os, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
buf = os.urandom(65536)
h.pwrite(buf, 12345)
h.flush()
assert h.pread(65536, 12345) == buf
h.shutdown()
PY
check_logs_clean || exit 1
