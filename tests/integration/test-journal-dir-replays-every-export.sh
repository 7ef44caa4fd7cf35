#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A shared directory of write logs (journal = { dir = ...; } at the top
# level) gives every writable export a log of its own, named after it, and
# a kill -9 after FLUSHes loses nothing on any of them.
#   - wbd -n names journal.dir's file and line when the directory cannot
#     be made (its parent missing).
#   - Two exports, "disk0" and "vm/../root" (a '/' and a '..' in the name),
#     and a read-only one, with the directory missing: the start makes it
#     (0700), with disk0.wal and vm%2F..%2Froot.wal in it (0600) and nothing
#     else, nothing outside it; wbctl status shows each log's path.
#   - Each writable export gets 1 MiB of random data, FLUSHed, writeback
#     held off, so the data is in the logs only; SIGKILL.  The backing files
#     do not hold it; a new start replays both logs (said in the log), the
#     data reads back through wbd, and a SIGTERM drains it to both backing
#     files.
#   - A reload with another journal.dir says a restart is needed, as for a
#     changed journal.path.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

WAL=$T/logs/wal
EXPORTS_TEXT='exports = (
  { name = "disk0"; backing = "'$T'/disk0.img"; size = "16M"; },
  { name = "vm/../root"; backing = "'$T'/root.img"; size = "16M"; },
  { name = "ro"; backing = "'$T'/ro.img"; size = "16M"; readonly = true; }
);'
truncate -s 16M "$T/ro.img"
# write_config wants an export; the exports are replaced below.
add_export placeholder 1M rw
write_cache_config 64M 'dirty_background_ratio = 80; dirty_ratio = 90; dirty_writeback_centisecs = 360000; dirty_expire_centisecs = 360000;'
"$PYTHON" - "$CONF" "$EXPORTS_TEXT" "$WAL" <<'PY'
import re, sys
conf, exports, wal = sys.argv[1:]
text = open(conf).read()
text = re.sub(r"exports = \(.*\);\n", "", text, flags=re.S)
text += 'journal = { dir = "%s"; size = "8M"; };\n%s\n' % (wal, exports)
open(conf, "w").write(text)
PY
line=$(grep -n '^journal = ' "$CONF" | cut -d: -f1)

log "wbd -n with the directory's parent missing"
rc=0
"$WBD" -n -c "$CONF" >"$T/check.out" 2>&1 || rc=$?
((rc == 1)) || fail "wbd -n accepted journal.dir whose parent is missing: $(cat "$T/check.out")"
grep -q "^wbd: $CONF:$line: journal.dir: $WAL does not exist, nor directory $T/logs to make it in\$" "$T/check.out" ||
	fail "wbd -n does not name journal.dir's file and line: $(cat "$T/check.out")"
mkdir "$T/logs"
"$WBD" -n -c "$CONF" >"$T/check.out" 2>&1 ||
	fail "wbd -n refused a journal.dir it can make: $(cat "$T/check.out")"

start_wbd
[[ -d $WAL ]] || fail "the start did not make $WAL"
[[ $(stat -c %a "$WAL") == 700 ]] || fail "$WAL has mode $(stat -c %a "$WAL"), not 700"
ls -A "$WAL" | sort >"$T/files"
printf '%s\n' 'disk0.wal' 'vm%2F..%2Froot.wal' >"$T/want"
diff -u "$T/want" "$T/files" >&2 || fail "the logs in $WAL are not one per writable export, named safely"
for f in "$WAL"/*; do
	[[ $(stat -c %a "$f") == 600 ]] || fail "$f has mode $(stat -c %a "$f"), not 600"
done
[[ -z $(find "$T" -name '*.wal' ! -path "$WAL/*") ]] ||
	fail "a log outside $WAL: $(find "$T" -name '*.wal' ! -path "$WAL/*")"
"$WBCTL" -s "$T/control.sock" status --json >"$T/status.json"
"$PYTHON" - "$T/status.json" "$WAL" <<'PY' || fail "see above"
import json, sys
st = json.load(open(sys.argv[1]))
wal = sys.argv[2]
want = {"disk0": wal + "/disk0.wal", "vm/../root": wal + "/vm%2F..%2Froot.wal",
        "ro": None}
got = {e["name"]: e["journal"] and e["journal"]["path"] for e in st["exports"]}
if got != want:
    sys.exit("FAIL: wbctl status shows the logs %s, expected %s" % (got, want))
PY

log "1 MiB FLUSHed to each writable export, then SIGKILL"
"$PYTHON" - "$SOCK" "$T" "$WBD_PID" <<'PY' || fail "see above"
import nbd, os, signal, sys
sock, tdir, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
hs = []
for i, name in enumerate(("disk0", "vm/../root")):
    h = nbd.NBD()
    h.set_export_name(name)
    h.connect_unix(sock)
    data = os.urandom(1 << 20)
    open("%s/data%d" % (tdir, i), "wb").write(data)
    h.pwrite(data, (i + 1) << 20)
    h.flush()
    hs.append(h)
os.kill(pid, signal.SIGKILL)
PY
wait_exit "$WBD_PID" 10 || fail "wbd still running after SIGKILL"
for i in 0 1; do
	img=$T/disk0.img
	((i == 1)) && img=$T/root.img
	if [[ -f $img ]] && cmp -s <(dd if="$img" bs=1M skip=$((i + 1)) count=1 status=none) "$T/data$i"; then
		fail "$img holds its FLUSHed data before the replay: the log was not what kept it"
	fi
done

log "restart: both logs replayed"
: >"$LOG"
start_wbd
for f in 'disk0.wal' 'vm%2F..%2Froot.wal'; do
	grep -qF "write log $WAL/$f: replayed" "$LOG" ||
		fail "$f was not replayed: $(grep 'write log' "$LOG")"
done
"$PYTHON" - "$SOCK" "$T" <<'PY' || fail "see above"
import nbd, sys
sock, tdir = sys.argv[1], sys.argv[2]
for i, name in enumerate(("disk0", "vm/../root")):
    h = nbd.NBD()
    h.set_export_name(name)
    h.connect_unix(sock)
    want = open("%s/data%d" % (tdir, i), "rb").read()
    if h.pread(len(want), (i + 1) << 20) != want:
        sys.exit("FAIL: export %r does not read back its FLUSHed data" % name)
    h.shutdown()
PY

log "a reload with another journal.dir"
sed -i "s|dir = \"$WAL\"|dir = \"$T/logs/other\"|" "$CONF"
kill -HUP "$WBD_PID"
wait_log 5 'reload: .*journal changed: needs a restart' || true
for name in disk0 vm/../root; do
	grep -qF "export \"$name\": backing, size, readonly, direct, tls, description or journal changed: needs a restart" "$LOG" ||
		fail "the reload did not say $name's log needs a restart: $(grep reload "$LOG")"
done
[[ ! -e $T/logs/other ]] || fail "the reload made the new directory, its logs unused"

stop_wbd
for i in 0 1; do
	img=$T/disk0.img
	((i == 1)) && img=$T/root.img
	cmp -s <(dd if="$img" bs=1M skip=$((i + 1)) count=1 status=none) "$T/data$i" ||
		fail "$img lacks its FLUSHed data after the drain"
done
log "PASS"
