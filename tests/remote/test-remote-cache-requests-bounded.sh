#!/usr/bin/env bash
# NBD_CMD_CACHE cannot take a device's workers from other clients: with
# limits.max_cache_requests = 2 and a remote whose reads take 1 s
# (nbdkit's delay filter), 8 CACHE requests pipelined on one connection
# get 2 carried out (their replies after the reads, about 1 s) and 6
# answered at once without prefetching (as the protocol allows: CACHE is
# advisory); wbctl status counts the 6 (limits.cache_requests_skipped)
# and the log says why, once.  A READ from another client meanwhile is
# served.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd

truncate -s 64M "$T/remote.img"
start_nbdkit kit --filter=delay file "$T/remote.img" rdelay=1
add_remote_export disk0 "$(kit_uri "$KIT_SOCK")"
write_cache_config 64M ''
echo 'limits = { max_cache_requests = 2; };' >>"$CONF"
start_wbd

"$PYTHON" - "$PORT" "$SRCDIR/../integration" "$(uri_unix disk0)" <<'PY' || fail "see above"
import nbd, struct, sys, time, types
port, libdir, uri = int(sys.argv[1]), sys.argv[2], sys.argv[3]
sys.path.insert(0, libdir)
import nbdraw
CMD_CACHE = 5
F_SEND_CACHE = 1 << 10

r = nbdraw.Raw(types.SimpleNamespace(tcp=port), tcp=True)
_, flags = r.open("disk0")
if not flags & F_SEND_CACHE:
    sys.exit("FAIL: CACHE not advertised")
start = time.monotonic()
for i in range(8):
    r.request(CMD_CACHE, i << 20, 64 << 10, handle=i + 1)
fast = slow = 0
for _ in range(8):
    handle, err, _ = r.reply()
    if err != 0:
        sys.exit("FAIL: CACHE %d failed: %s" % (handle, nbdraw.errname(err)))
    took = time.monotonic() - start
    if took < 0.5:
        fast += 1
    else:
        slow += 1
print("CACHE: %d answered at once, %d after the remote's reads" % (fast, slow))
if fast != 6 or slow != 2:
    sys.exit("FAIL: expected 6 answered at once and 2 carried out")
# Another client's read is served meanwhile (from the remote, 1 s).
h = nbd.NBD()
h.connect_uri(uri)
h.pread(4096, 32 << 20)
h.shutdown()
r.close()
PY
skipped=$("$WBCTL" -s "${SOCK%/*}/control.sock" status --json |
	"$PYTHON" -c 'import json, sys; l = json.load(sys.stdin)["limits"]; print(l["max_cache_requests"], l["cache_requests_skipped"])')
[[ $skipped == "2 6" ]] || fail "status: max_cache_requests and cache_requests_skipped are $skipped, expected 2 6"
grep -q 'CACHE answered without prefetching: device .* has 2 being carried out (limits.max_cache_requests)' "$LOG" ||
	fail "no log line for the CACHE requests answered at once"
assert_alive
