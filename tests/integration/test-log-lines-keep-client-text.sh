#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# What a client sends never becomes a log line of its own: an export name
# holding a newline and a forged line ("x\n<0>wbd: error: FORGED") is
# logged on the one line that names it, its control characters shown as
# '?', both on the terminal and in the journal's format (WBD_LOG=journal:
# "<prio>" prefixes, which the journal believes on every line).
source "${SRCDIR:-$(dirname "$0")}/lib.sh"

add_export disk0 16M rw
write_config
for mode in terminal journal; do
	if [[ $mode == journal ]]; then
		stop_wbd
		: >"$LOG"
		JOURNAL_STREAM=$(stat -c "%d:%i" "$LOG") start_wbd
	else
		start_wbd
	fi
	"$PYTHON" - "$PORT" <<'PY' || fail "see above"
import socket, struct, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(5)
got = b""
while len(got) < 18:
    got += s.recv(18 - len(got))
s.sendall(struct.pack(">I", 1))         # fixed newstyle
name = b"x\n<0>wbd: error: FORGED\r\x1b[2J"
s.sendall(struct.pack(">QII", 0x49484156454F5054, 1, len(name)) + name)
if s.recv(1) != b"":
    sys.exit("FAIL: an unknown EXPORT_NAME was not closed")
PY
	wait_log 5 'unknown export "x' || true
	grep -q 'unknown export "x?<0>wbd: error: FORGED??\[2J"' "$LOG" ||
		fail "$mode: the export name is not logged on its line, escaped: $(grep -a 'unknown export' "$LOG")"
	if grep -aq '^<0>\|^wbd: error: FORGED\|^FORGED' "$LOG"; then
		fail "$mode: a client's text became a log line: $(grep -a FORGED "$LOG")"
	fi
	log "$mode: $(grep -a 'unknown export' "$LOG" | tail -1)"
done
assert_alive
stop_wbd
