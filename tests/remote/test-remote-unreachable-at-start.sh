#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A remote that does not answer when wbd starts holds nothing up: wbd
# starts, serves its other export, tells a client asking for the remote
# export that it is not available (NBD_REP_ERR_UNKNOWN, as a name nobody
# configured) with a message saying that it waits for its remote, not that
# it is unknown, logs who asked (once in 10 s at most on each I/O thread),
# and lists it as waiting in the control status; once nbdkit is started on
# that socket, the export is added without a restart, and data written
# through it reaches nbdkit at FLUSH.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl
need nbdinfo nbdcopy

LATE=$T/late.sock               # nothing listens here yet
add_export local 8M rw
add_remote_export late "$(kit_uri "$LATE")"
write_config
add_remote_settings 'connect_timeout_ms = 2000; reconnect_max_ms = 300;'
start_wbd

# status_json: the control status answer, as JSON.
status_json() {
	remote_wbctl status --json
}

# The other export is served.
head -c 8M /dev/urandom >"$T/data"
nbdcopy "$T/data" "$(uri_unix local)" || fail "nbdcopy to the local export failed"
nbdcopy "$(uri_unix local)" "$T/back" || fail "nbdcopy from the local export failed"
cmp -s "$T/data" "$T/back" || fail "the local export does not read back what was written"

# The waiting one is not available to clients, who are told why (the
# server's message, which libnbd shows in its debug output), and listed as
# waiting.
asked_began=$(date +%s%N)
for ((i = 0; i < 3; i++)); do
	if LIBNBD_DEBUG=1 nbdinfo "$(uri_unix late)" >"$T/info.out" 2>&1; then
		fail "nbdinfo found the export whose remote is down: $(cat "$T/info.out")"
	fi
	grep -q 'server error message: export "late" is configured, but its remote NBD server has not answered yet; wbd keeps trying: try again later' "$T/info.out" ||
		fail "the client is not told that the export waits for its remote: $(grep -i error "$T/info.out")"
	grep -q 'unknown export' "$T/info.out" &&
		fail "the export waiting for its remote is called unknown: $(grep -i error "$T/info.out")"
done
asked_s=$((($(date +%s%N) - asked_began) / 1000000000))
LIBNBD_DEBUG=1 nbdinfo "$(uri_unix lat)" >"$T/info.out" 2>&1 &&
	fail "nbdinfo found an export nobody configured: $(cat "$T/info.out")"
grep -q 'server error message: unknown export "lat"' "$T/info.out" ||
	fail "a name nobody configured is not called unknown: $(grep -i error "$T/info.out")"
# Logged with the remote, not once per request: 3 clients, each asking
# twice (INFO, then GO), one line in 10 s at most on each I/O thread.
grep -E 'asked for export "late", which is not served until its remote nbd\+unix:.*late\.sock answers' "$LOG" >"$T/asked" ||
	fail "the log does not say a client asked for the waiting export"
io_threads=$(sed -n 's/.* ready: .* \([0-9]*\) I\/O thread(s).*/\1/p' "$LOG")
asked_max=$((io_threads * (asked_s / 10 + 1)))
(($(wc -l <"$T/asked") <= asked_max)) ||
	fail "$(wc -l <"$T/asked") lines for 6 requests in $asked_s s on $io_threads I/O thread(s), at most $asked_max expected: $(cat "$T/asked")"
grep -q 'asked for export "lat"' "$LOG" && fail "a name nobody configured logged as waiting"
sleep 1                         # a few failed attempts
st=$(status_json)
"$PYTHON" - "$st" <<'PY' || fail "status: $st"
import json, sys
st = json.loads(sys.argv[1])
w = st["waiting_exports"]
if [x["name"] for x in w] != ["late"]:
    sys.exit("FAIL: waiting_exports is %r, expected the export late" % w)
if w[0]["attempts"] < 2:
    sys.exit("FAIL: no retry after a second: %r" % w)
if "late" in [e["name"] for e in st["exports"]]:
    sys.exit("FAIL: the waiting export is listed as served")
PY
remote_wbctl status | tr -s ' \n' ' ' | grep -q 'late: WAITING for its remote nbd+unix:.* failed attempt(s)' ||
	fail "wbctl status does not show the waiting export: $(remote_wbctl status)"
grep -q 'export "late": its remote .* does not answer' "$LOG" ||
	fail "the log does not say why the export waits"

# The remote comes up: the export is added without a restart.
start_nbdkit late --filter=log memory 16M logfile="$T/late-requests.log"
[[ $KIT_SOCK == "$LATE" ]] || fail "nbdkit socket $KIT_SOCK is not $LATE"
for ((i = 0; i < 100; i++)); do
	nbdinfo "$(uri_unix late)" >"$T/info.out" 2>&1 && break
	sleep 0.1
done
((i < 100)) || fail "the export was not added 10 s after its remote came up: $(cat "$T/info.out")"
grep -q 'export-size: 16777216' "$T/info.out" || fail "size is not the remote's: $(cat "$T/info.out")"
grep -q 'export "late": its remote answered' "$LOG" || fail "the log does not say the export was added"
st=$(status_json)
"$PYTHON" - "$st" <<'PY' || fail "status: $st"
import json, sys
st = json.loads(sys.argv[1])
if st["waiting_exports"]:
    sys.exit("FAIL: still listed as waiting: %r" % st["waiting_exports"])
if "late" not in [e["name"] for e in st["exports"]]:
    sys.exit("FAIL: the export is not listed as served")
PY

# Data through it reaches nbdkit at FLUSH.
head -c 16M /dev/urandom >"$T/data16"
nbdcopy --flush "$T/data16" "$(uri_unix late)" || fail "nbdcopy to the late export failed"
remote_read "$LATE" 0 $((16 << 20)) "$T/on-kit" || fail "reading nbdkit directly failed"
cmp -s "$T/data16" "$T/on-kit" || fail "nbdkit does not hold the data flushed through wbd"
