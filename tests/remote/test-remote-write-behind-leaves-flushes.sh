#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Write-behind leaves a client that FLUSHes often to its FLUSHes
# (remote.md, "Write-behind"): 200 rounds of 8 scattered 4K writes, then a
# FLUSH, on a remote that takes 2 ms a write.  Each FLUSH writes its 8
# pages itself (one window, with FUA); write-behind takes almost none of
# them (a FLUSH came less than 100 ms ago, and 8 pages fit in a window),
# and `wbctl status` counts the times it left them
# (link.write_behind_deferred).  Then 4 MiB of scattered pages with no
# FLUSH, more than a window: written behind on their own, a FLUSH just
# before notwithstanding.  With periodic writeback off
# (dirty_writeback_centisecs = 0) it never defers: 8 pages written just
# after a FLUSH, and nothing after them, must still go on their own
# (nothing else would take them).  Last, remote.write_behind_defer_ms = 0
# (status shows it, 100 before) never defers: the rounds of 1 again, and
# write-behind takes pages of them, leaving none.  nbdkit holds every
# byte at the end.
# Before the deferral write-behind took most pages of every round (and
# the counter did not exist).
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl

start_nbdkit kit --filter=delay memory 64M delay-write=2ms
KIT=$KIT_SOCK
add_remote_export disk0 "$(kit_uri "$KIT")"
write_cache_config 256M 'dirty_background_ratio = 50; dirty_ratio = 60; dirty_expire_centisecs = 3000;'
start_wbd

# rounds.py URI OUT ROUNDS PER FLUSH [TAIL]: ROUNDS of PER scattered 4K
# pages in flight together, each round then a FLUSH if FLUSH is "after",
# or one FLUSH before the first if "before"; then TAIL pages more with no
# FLUSH; the image of the first 16 MiB into OUT (its old bytes read
# first).
cat >"$T/rounds.py" <<'PY'
import nbd, os, random, sys
uri, out, rounds, per, flush = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
h = nbd.NBD()
h.connect_uri(uri)
img = bytearray(h.pread(16 << 20, 0))
if flush == "before":
    h.flush()
for r in range(rounds):
    for p in random.sample(range(4096), per):
        buf = os.urandom(4096)
        img[p * 4096:(p + 1) * 4096] = buf
        h.aio_pwrite(buf, p * 4096)
    while h.aio_in_flight() > 0:
        h.poll(-1)
    if flush == "after":
        h.flush()
for p in random.sample(range(4096), int(sys.argv[6]) if len(sys.argv) > 6 else 0):
    buf = os.urandom(4096)
    img[p * 4096:(p + 1) * 4096] = buf
    h.pwrite(buf, p * 4096)
h.shutdown()
open(out, "wb").write(img)
PY

# 1. Rounds of 8 writes and a FLUSH: the FLUSHes write them.
"$PYTHON" "$T/rounds.py" "$(uri_unix disk0)" "$T/img-1" 200 8 after || fail "the rounds of writes and FLUSHes failed"
written=$((200 * 8 * 4096))
behind=$(link_field write_behind_bytes)
deferred=$(link_field write_behind_deferred)
((behind * 4 <= written)) ||
	fail "write-behind wrote $behind of the $written bytes that rounds of 8 writes and a FLUSH wrote"
((deferred > 0)) || fail "write-behind never left the pages to a FLUSH (write_behind_deferred $deferred)"
remote_read "$KIT" 0 $((16 << 20)) "$T/remote-1"
cmp "$T/img-1" "$T/remote-1" || fail "nbdkit does not hold what the FLUSHes covered"
log "rounds of 8 writes and a FLUSH: write-behind wrote $behind of $written bytes, left them $deferred time(s)"

# 2. A FLUSH, then 4 MiB with none: more than a window, written behind
# (no FLUSH, no threshold, no expiry would send it for 30 s).
"$PYTHON" "$T/rounds.py" "$(uri_unix disk0)" "$T/img-2" 1 1024 before || fail "the writes failed"
wait_clean 20
behind2=$(link_field write_behind_bytes)
((behind2 - behind >= 3 << 20)) ||
	fail "4 MiB with no FLUSH: write-behind wrote $((behind2 - behind)) bytes"
remote_read "$KIT" 0 $((16 << 20)) "$T/remote-2"
cmp "$T/img-2" "$T/remote-2" || fail "nbdkit does not hold what write-behind wrote"
log "4 MiB after the FLUSHes, none after: write-behind wrote $((behind2 - behind)) bytes"

# 3. Periodic writeback off: 8 pages right after the last FLUSH, then
# nothing; write-behind must take them (no periodic pass would).
remote_wbctl tune dirty_writeback_centisecs=0 >/dev/null || fail "wbctl tune dirty_writeback_centisecs=0"
"$PYTHON" "$T/rounds.py" "$(uri_unix disk0)" "$T/img-3" 20 8 after 8 || fail "the writes failed"
wait_clean 10 || fail "with periodic writeback off, 8 pages written after a FLUSH stayed dirty"
remote_read "$KIT" 0 $((16 << 20)) "$T/remote-3"
cmp "$T/img-3" "$T/remote-3" || fail "nbdkit does not hold the pages written after the last FLUSH"
log "periodic writeback off: the pages after the last FLUSH went on their own"

# 4. remote.write_behind_defer_ms = 0 (a reload): never deferred, so the
# same rounds as in 1 leave write_behind_deferred where it was, and
# write-behind takes pages of them.
(($(link_field write_behind_defer_ms) == 100)) ||
	fail "status shows write_behind_defer_ms $(link_field write_behind_defer_ms), not its default 100"
add_remote_settings 'write_behind_defer_ms = 0;'
reload_remote
remote_wbctl tune dirty_writeback_centisecs=500 >/dev/null || fail "wbctl tune dirty_writeback_centisecs=500"
(($(link_field write_behind_defer_ms) == 0)) ||
	fail "after the reload status shows write_behind_defer_ms $(link_field write_behind_defer_ms), not 0"
deferred=$(link_field write_behind_deferred) behind=$(link_field write_behind_bytes)
"$PYTHON" "$T/rounds.py" "$(uri_unix disk0)" "$T/img-4" 200 8 after || fail "the rounds of writes and FLUSHes failed"
deferred4=$(link_field write_behind_deferred) behind4=$(link_field write_behind_bytes)
log "write_behind_defer_ms = 0: write-behind wrote $((behind4 - behind)) of $written bytes, left them $((deferred4 - deferred)) time(s)"
((deferred4 == deferred)) || fail "with write_behind_defer_ms = 0 write-behind still left pages to a FLUSH $((deferred4 - deferred)) time(s)"
((behind4 > behind)) || fail "with write_behind_defer_ms = 0 write-behind took none of the rounds' pages"
remote_read "$KIT" 0 $((16 << 20)) "$T/remote-4"
cmp "$T/img-4" "$T/remote-4" || fail "nbdkit does not hold what the FLUSHes covered"
assert_alive
