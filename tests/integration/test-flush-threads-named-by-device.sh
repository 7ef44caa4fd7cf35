#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Writeback runs on threads named flush-MAJ:MIN after the device holding
# the backing file (as stat reports it); two exports on one filesystem
# share one pool.  With min_workers 1, max_workers 4, worker_spawn_ms 50 and
# worker_idle_ms 500, the pool grows above one thread under heavy parallel
# writeback (four clients sending FUA writes and FLUSHes, writethrough
# exports) and shrinks back to one thread once idle.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

add_export_mode disk0 64M writethrough
add_export_mode disk1 64M writeback
write_cache_config 32M 'dirty_background_bytes = "64K"; dirty_bytes = "8M"; min_workers = 1; max_workers = 4; worker_spawn_ms = 50; worker_idle_ms = 500;'
start_wbd

majmin=$(dev_majmin "$T/disk0.img")
name=flush-$majmin
name=${name:0:15}               # Linux keeps 15 characters of a thread name
log "backing files on device $majmin: expecting threads named $name"

n=$(count_threads "$WBD_PID" "$name")
((n == 1)) || fail "expected 1 thread named $name at start, found $n ($(thread_names "$WBD_PID" | sort | uniq -c | tr '\n' ' '))"
if thread_names "$WBD_PID" | grep '^flush-' | grep -vxF -- "$name" >/dev/null; then
	fail "flush- threads for another device: $(thread_names "$WBD_PID" | grep '^flush-' | sort -u | tr '\n' ' ')"
fi

log "load: four clients with writethrough writes, FUA writes and FLUSHes"
for i in 0 1 2 3; do
	"$PYTHON" - "$SOCK" "$i" "$T/load.stop" <<'PY' >"$T/load$i.out" 2>&1 &
import nbd, os, sys, time
sock, i, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3]
hs = []
for name in ("disk0", "disk1"):
    h = nbd.NBD()
    h.connect_uri("nbd+unix:///%s?socket=%s" % (name, sock))
    hs.append(h)
buf = nbd.Buffer.from_bytearray(bytearray(os.urandom(64 << 10)))
base = i * (16 << 20)
n = 0
start = time.monotonic()
while not os.path.exists(stop) and time.monotonic() - start < 30:
    for h in hs:
        while h.aio_in_flight() < 16:
            off = base + (n % 256) * (64 << 10)
            if n % 4 == 3:
                h.aio_flush()
            else:
                h.aio_pwrite(buf, off, flags=nbd.CMD_FLAG_FUA if n % 2 else 0)
            n += 1
        h.poll(0)
    time.sleep(0.001)
for h in hs:
    while h.aio_in_flight() > 0:
        h.poll(-1)
    h.shutdown()
PY
	_PIDS+=("$!")
	load_pids+=("$!")
done

grew=0
for ((t = 0; t < 150; t++)); do
	n=$(count_threads "$WBD_PID" "$name")
	((n > grew)) && grew=$n
	((n >= 2)) && ((t >= 20)) && break
	sleep 0.1
done
touch "$T/load.stop"
for p in "${load_pids[@]}"; do
	wait_exit "$p" 30 || fail "a load client did not stop"
	[[ $EXIT_STATUS == 0 ]] || fail "a load client failed: $(cat "$T"/load*.out)"
done
log "the pool grew to $grew threads"
((grew >= 2)) || fail "the $name pool never grew above 1 thread under load"
((grew <= 4)) || fail "the $name pool grew to $grew threads, above max_workers 4"

# Idle: back to min_workers within a bounded time (idle timeout 0.5 s).
for ((t = 0; t < 100; t++)); do
	n=$(count_threads "$WBD_PID" "$name")
	((n == 1)) && break
	sleep 0.1
done
((n == 1)) || fail "the $name pool still has $n threads 10 s after the load stopped"
log "back to 1 thread after $((t / 10)).$((t % 10)) s idle"
assert_alive
