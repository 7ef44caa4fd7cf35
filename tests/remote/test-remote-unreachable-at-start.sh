#!/usr/bin/env bash
# A remote that does not answer when wbd starts holds nothing up: wbd
# starts, serves its other export, says the remote export is unknown to
# clients and lists it as waiting in the control status; once nbdkit is
# started on that socket, the export is added without a restart, and data
# written through it reaches nbdkit at FLUSH.
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

# The waiting one is unknown to clients, and listed as waiting.
if nbdinfo "$(uri_unix late)" >"$T/info.out" 2>&1; then
	fail "nbdinfo found the export whose remote is down: $(cat "$T/info.out")"
fi
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
remote_wbctl status | grep -q 'late: WAITING for its remote nbd+unix:.* failed attempt(s)' ||
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
