#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# An ordered write log under a writer that never FLUSHes: its pages go to
# the backing device only from the log, so dirty data must turn into
# epochs no client asked for, or the writer would be held for ever.
#   - 96 MiB written in 1 MiB writes with no FLUSH, through a 32 MiB cache
#     (dirty limit 20 %: 6.4 MiB) and a 16 MiB log, to nbdkit's file
#     plugin: the writer is paced (wbctl status: paced or held writes) and
#     finishes within 120 s.
#   - With no FLUSH still, the remote then holds every byte (the tick's
#     epochs), the cache is clean, the log empty; nothing fell back to
#     writeback from the cache and order was never lost.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl

truncate -s 128M "$T/remote.img"
start_nbdkit kit file "$T/remote.img"
add_remote_export disk0 "$(kit_uri "$KIT_SOCK")" \
	"journal = { path = \"$T/disk0.wal\"; size = \"16M\"; ordered = true; };"
write_cache_config 32M 'dirty_writeback_centisecs = 50; dirty_background_ratio = 10; dirty_ratio = 20;'
start_wbd

head -c 96M /dev/urandom >"$T/data"
log "96 MiB with no FLUSH"
start=$(date +%s)
timeout 120 "$PYTHON" - "$(uri_unix disk0)" "$T/data" <<'PY' || fail "the writer did not finish within 120 s (rc $?)"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
with open(sys.argv[2], "rb") as f:
    off = 0
    while True:
        b = f.read(1 << 20)
        if not b:
            break
        h.pwrite(b, off)
        off += len(b)
h.shutdown()  # no FLUSH: NBD_CMD_DISC only
PY
log "written in $(($(date +%s) - start)) s"
read -r paced held <<<"$(remote_wbctl status --json | "$PYTHON" -c 'import json, sys
r = json.load(sys.stdin)["requests"]
print(r["paced_writes"], r["held_writes"])')"
log "paced $paced, held $held"
((paced + held > 0)) || fail "the writer was never paced nor held"
for ((i = 0; i < 300; i++)); do
	read -r lag records <<<"$(jfield apply_lag_epochs records)"
	dirty=$(remote_wbctl status --json | "$PYTHON" -c 'import json, sys
print(json.load(sys.stdin)["cache"]["dirty_bytes"])')
	((lag == 0 && records == 0 && dirty == 0)) && break
	sleep 0.1
done
((lag == 0 && records == 0 && dirty == 0)) ||
	fail "30 s after the writer: lag $lag epoch(s), $records record(s), $dirty bytes dirty"
cmp -s -n $((96 << 20)) "$T/data" "$T/remote.img" ||
	fail "the remote does not hold what was written"
read -r commits applied fallbacks lost <<<"$(jfield commits epochs_applied fallbacks order_lost)"
log "commits $commits, epochs applied $applied, fallbacks $fallbacks, order lost $lost"
((commits >= 2 && applied >= 2 && fallbacks == 0)) ||
	fail "commits $commits, epochs applied $applied, fallbacks $fallbacks"
[[ $lost == False ]] || fail "order_lost: $lost"
stop_wbd
log "PASS"
