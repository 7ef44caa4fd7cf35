#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Exports removed by a reload are freed once written back and unreachable,
# and their table slots are used again: 1000 reloads, each adding an export
# and removing the one the reload before added, all succeed; each new
# export serves at once (nbdinfo); a client doing verified writes and
# reads on another export sees no error throughout; a removed export's
# dirty data is on its backing file once it is gone; and wbd's memory
# stays flat (RSS after the last cycle within a few MiB of RSS after the
# 100th).  Before the fix a device took 256 exports in all, removed ones
# included, and every reload after that said "could not be added".
#
# RELOAD_CYCLES (default 1000; 300 under AddressSanitizer, where each
# cycle takes several times as long) changes the number of cycles.
source "${SRCDIR:-$(dirname "$0")}/lib-ctl.sh"
need nbdinfo
need_python_nbd

rss_bound 4
CYCLES=1000
# In the loop, wbctl's own leak check at exit (a fifth of a second each
# under ASan) is left to the other tests.
loop_asan=
if [[ $(ldd "$WBD" 2>/dev/null) == *libasan* ]]; then
	CYCLES=300
	loop_asan=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
fi
CYCLES=${RELOAD_CYCLES:-$CYCLES}
((CYCLES >= 200)) || fail "RELOAD_CYCLES must be at least 200"

# The cache (16M) is smaller than disk0 (32M), which the client fills
# first: every page of the cache is touched before RSS is first measured,
# so RSS measures what the reloads keep, not the cache filling up.
# Periodic writeback is off and the client flushes after each write, so a
# removed export's data is still dirty when the reload removes it.
add_export disk0 32M rw
write_cache_config 16M 'dirty_writeback_centisecs = 0;'
start_wbd
base=$(sed '/^exports = (/,/^);/d' "$CONF")
disk0=$(grep 'name = "disk0"' "$CONF")

# config I...: the base config with disk0 and the exports cyc-I...
config() {
	local i
	{
		printf '%s\nexports = (\n%s' "$base" "$disk0"
		for i in "$@"; do
			printf ',\n  { name = "cyc-%d"; backing = "%s/cyc-%d.img"; size = "1M"; readonly = false; }' \
				"$i" "$T" "$i"
		done
		printf '\n);\n'
	} >"$CONF"
}

# The client on disk0: verified writes and reads until $T/stop appears.
"$PYTHON" - "$(uri_unix disk0)" "$T/stop" "$T/client.out" <<'PY' &
import nbd, os, random, sys, time
uri, stop, out = sys.argv[1:]
h = nbd.NBD()
h.connect_uri(uri)
size = h.get_size()
chunk = 1 << 20
for off in range(0, size, chunk):
    h.pwrite(os.urandom(chunk), off)
h.flush()
open(out, "w").write("filled\n")
ops = 0
while not os.path.exists(stop):
    off = random.randrange(0, size // 65536) * 65536
    data = os.urandom(65536)
    h.pwrite(data, off)
    h.flush()
    if h.pread(65536, off) != data:
        open(out, "a").write("MISMATCH at %d\n" % off)
        sys.exit(1)
    ops += 1
    time.sleep(0.002)       # leave the CPUs to the reloads
open(out, "a").write("ops %d\n" % ops)
h.shutdown()
PY
client=$!
_PIDS+=("$client")
for ((i = 0; i < 300; i++)); do
	[[ -s $T/client.out ]] && break
	proc_alive "$client" || fail "the client on disk0 failed"
	sleep 0.1
done
[[ -s $T/client.out ]] || fail "the client did not fill disk0 within 30 s"

# dirty_write I: 1M of random data into cyc-I, not flushed; kept in
# $T/data-I.  Then cyc-I holds it dirty (nothing writes it back yet).
dirty_write() {
	"$PYTHON" - "$(uri_unix "cyc-$1")" "$T/data-$1" <<'PY' || fail "the writer to cyc-$1 failed"
import nbd, os, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
data = os.urandom(1 << 20)
h.pwrite(data, 0)
open(sys.argv[2], "wb").write(data)
h.shutdown()
PY
	expect_exit 0 wbctl --json status
	"$SYSPY" - "$T/out" "cyc-$1" <<'PY' || fail "cyc-$1 does not hold its write dirty"
import json, sys
st = json.load(open(sys.argv[1]))
e = [e for e in st["exports"] if e["name"] == sys.argv[2]][0]
sys.exit(0 if e["dirty_bytes"] >= 1 << 20 else 1)
PY
}

dirty=()
start=$SECONDS
for ((i = 1; i <= CYCLES; i++)); do
	config "$i"
	ASAN_OPTIONS=$loop_asan wbctl reload >"$T/out" 2>&1 ||
		fail "cycle $i: wbctl reload failed: $(cat "$T/out")"
	read -r -d '' OUT <"$T/out" || true
	[[ $OUT == *"export \"cyc-$i\" added"* ]] ||
		fail "cycle $i: reload did not add cyc-$i: $OUT"
	((i == 1)) || [[ $OUT == *"export \"cyc-$((i - 1))\" removed"* ]] ||
		fail "cycle $i: reload did not remove cyc-$((i - 1)): $OUT"
	nbdinfo --size "$(uri_unix "cyc-$i")" >/dev/null ||
		fail "cycle $i: the new export cyc-$i does not serve"
	if ((i % 250 == 50 && i < CYCLES)); then
		dirty_write "$i"
		dirty+=("$i")
	fi
	if ((i == 100)); then
		rss100=$(vmrss_kib "$WBD_PID")
		log "RSS after 100 cycles: $rss100 KiB ($((SECONDS - start)) s)"
	fi
done
log "$CYCLES cycles in $((SECONDS - start)) s"
proc_alive "$client" || fail "the client on disk0 failed: $(cat "$T/client.out")"

# Every removed export is written back and freed: only disk0 and the last
# one remain, and a name used before can be added again.
gone=
for ((i = 0; i < 300; i++)); do
	expect_exit 0 wbctl exports
	if [[ $(grep -c '^cyc-' <<<"$OUT") == 1 ]]; then
		gone=1
		break
	fi
	sleep 0.1
done
[[ -n $gone ]] || fail "30 s after the last reload, removed exports are still listed: $OUT"
for i in "${dirty[@]}"; do
	cmp -s -n $((1 << 20)) "$T/data-$i" "$T/cyc-$i.img" ||
		fail "cyc-$i was freed without its dirty data on the backing file"
done
grep -q "export \"cyc-${dirty[0]}\" removed: written back" "$LOG" ||
	fail "the log does not say cyc-${dirty[0]} was written back"
rss=$(vmrss_kib "$WBD_PID")
log "RSS after $CYCLES cycles: $rss KiB (after 100: $rss100 KiB; bound +$RSS_BOUND_MIB MiB)"
((rss - rss100 <= RSS_BOUND_MIB * 1024)) ||
	fail "RSS grew by $(((rss - rss100) / 1024)) MiB from cycle 100 to cycle $CYCLES"

config "$CYCLES" 1
expect_exit 0 wbctl reload
[[ $OUT == *'export "cyc-1" added'* ]] || fail "cyc-1 could not be added again: $OUT"
nbdinfo --size "$(uri_unix cyc-1)" >/dev/null || fail "cyc-1, added again, does not serve"

touch "$T/stop"
wait_exit "$client" 30 || fail "the client did not stop"
((EXIT_STATUS == 0)) || fail "the client on disk0 saw an error: $(cat "$T/client.out")"
log "client: $(tail -n 1 "$T/client.out")"
assert_alive
