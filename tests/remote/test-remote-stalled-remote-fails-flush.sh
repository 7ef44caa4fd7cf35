#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A remote that takes connections and handshakes but stops answering
# writes (drop-proxy.py swallows every write's payload while its stall
# file exists): a write times out (remote.io_timeout_ms, 1 s here), its
# connection is shut and counted lost.  That first loss, of a connection
# that had served, may be a connection a NAT dropped: the FLUSH tries
# again on a new one.  That new one fails the same way before it served
# anything, and that is the remote's failure: the FLUSH fails with EIO,
# a writeback error is counted and shown, and wbd does not go on
# retrying on fresh connections as if nothing were wrong.  Before, each
# timeout counted as a lost connection, never an error: the FLUSH took
# 8 tries (8.7 s at 1 s each; at the default 30 s, four minutes) with
# errors 0.  Then the stall ends: the data stays dirty meanwhile, and the
# next FLUSH puts every byte on nbdkit.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
wbd_behind_drop_proxy 'write_behind = false; io_timeout_ms = 1000; reconnect_max_ms = 200;'

errors() {
	remote_wbctl status --json | "$PYTHON" -c 'import json, sys
print(sum(d["errors"] for d in json.load(sys.stdin)["devices"]))'
}

write_scattered_pages "$(uri_unix disk0)" "$T/data" 1 64 64 2 flush ||
	fail "the writes or the FLUSH before the stall failed"
touch "$DROP.stall"
# One page and a FLUSH that must fail.
"$PYTHON" - "$(uri_unix disk0)" <<'PY' >"$T/flush.out" 2>&1 && fail "a FLUSH succeeded with the remote answering no write: $(cat "$T/flush.out")"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(b"\x5a" * 4096, 60 << 20)
try:
    h.flush()
except nbd.Error as e:
    print("FLUSH: %s" % e)
    sys.exit(1)
PY
grep -q 'FLUSH: .*Input/output error' "$T/flush.out" ||
	fail "the FLUSH did not fail with EIO: $(cat "$T/flush.out")"
errs=$(errors) lost=$(remote_field writes_on_lost_connections)
log "stalled: $(cat "$T/flush.out"); errors $errs, writes on lost connections $lost," \
	"swallowed $(grep -c '^swallowed' "$T/proxy.log")"
((errs > 0)) || fail "the FLUSH failed, yet status counts no writeback error"
((lost <= 2)) || fail "$lost writes were taken for lost connections: a stalled remote was retried as if it were up"
last=$(remote_wbctl status --json | "$PYTHON" -c 'import json, sys
print(" ".join(str(d["last_error"]) for d in json.load(sys.stdin)["devices"] if d["remote"]))')
log "last error shown: $last"
[[ -n $last && $last != None ]] || fail "status shows no last error for the stalled remote"

rm -f "$DROP.stall"
"$PYTHON" - "$(uri_unix disk0)" <<'PY' || fail "no FLUSH succeeded once the remote answered again"
import nbd, sys, time
h = nbd.NBD()
h.connect_uri(sys.argv[1])
for attempt in range(20):
    try:
        h.flush()
        break
    except nbd.Error as e:
        time.sleep(0.5)
else:
    sys.exit("FAIL: no FLUSH succeeded")
h.shutdown()
PY
remote_read "$KIT" $((60 << 20)) 4096 "$T/page"
cmp <(head -c 4096 /dev/zero | tr '\0' '\132') "$T/page" ||
	fail "nbdkit does not hold the page written during the stall"
remote_read "$KIT" 0 $((64 << 20)) "$T/remote"
cmp <(head -c $((60 << 20)) "$T/data") <(head -c $((60 << 20)) "$T/remote") ||
	fail "nbdkit does not hold the data written before the stall"
log "the stall over: the FLUSH succeeded, nbdkit holds every byte"
