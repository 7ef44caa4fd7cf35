#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# NBD_CMD_CACHE cannot take a device's workers from other clients: with
# limits.max_cache_requests = 2 and a remote whose reads take 1 s
# (nbdkit's delay filter), 8 CACHE requests pipelined on one connection
# get 2 carried out (their replies after the reads, about 1 s) and 6
# answered at once without prefetching (as the protocol allows: CACHE is
# advisory); a second batch the same (the first gave its slots back);
# wbctl status counts the 12 (limits.cache_requests_skipped) and the log
# says why, once.  A READ from another client while 2 prefetches run is
# served alongside them, not after.
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

for base in (0, 16):
    start = time.monotonic()
    for i in range(8):
        r.request(CMD_CACHE, (base + i) << 20, 64 << 10, handle=base + i + 1)
    got = []
    for _ in range(8):
        handle, err, _ = r.reply()
        if err != 0:
            sys.exit("FAIL: CACHE %d failed: %s" % (handle, nbdraw.errname(err)))
        got.append(time.monotonic() - start)
    fast = sum(1 for t in got if t < 0.5)
    print("CACHE batch at %d MiB: %d answered at once, %d after the "
          "remote's reads" % (base, fast, 8 - fast))
    if fast != 6:
        sys.exit("FAIL: expected 6 of 8 answered at once and 2 carried out")

# Another client's READ while 2 prefetches run is served alongside them.
for i in range(2):
    r.request(CMD_CACHE, (40 + i) << 20, 64 << 10, handle=100 + i)
time.sleep(0.2)
t = time.monotonic()
h = nbd.NBD()
h.connect_uri(uri)
h.pread(4096, 60 << 20)
h.shutdown()
took = time.monotonic() - t
for _ in range(2):
    handle, err, _ = r.reply()
    if err != 0:
        sys.exit("FAIL: CACHE %d failed" % handle)
print("another client's read took %.1f s while 2 prefetches ran" % took)
if took > 2.5:
    sys.exit("FAIL: a read waited %.1f s behind the prefetches" % took)
r.close()
PY
skipped=$("$WBCTL" -s "${SOCK%/*}/control.sock" status --json |
	"$PYTHON" -c 'import json, sys; l = json.load(sys.stdin)["limits"]; print(l["max_cache_requests"], l["cache_requests_skipped"])')
[[ $skipped == "2 12" ]] || fail "status: max_cache_requests and cache_requests_skipped are $skipped, expected 2 12"
grep -q 'CACHE answered without prefetching: device .* has 2 being carried out (limits.max_cache_requests)' "$LOG" ||
	fail "no log line for the CACHE requests answered at once"
assert_alive
