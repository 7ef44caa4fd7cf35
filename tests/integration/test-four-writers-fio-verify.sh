#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Four concurrent writers (fio --ioengine=nbd, numjobs=4, each on its own
# 16M of a 64M export, mixed block sizes, 8 requests in flight) write random
# blocks with crc32c checksums through a 16M cache -- so writeback, eviction
# and refills all happen under them -- and verify them through wbd.  After
# a clean shutdown, fio verifies the same blocks again straight from the
# backing file.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need fio
fio --enghelp 2>/dev/null | grep -qw nbd || skip "this fio has no nbd engine"

add_export_mode disk0 64M writeback
write_cache_config 16M 'dirty_background_ratio = 10; dirty_ratio = 30; dirty_expire_centisecs = 100; dirty_writeback_centisecs = 50;'
start_wbd

common=(--rw=randwrite --bsrange=4k-64k --size=16M --offset_increment=16M
	--numjobs=4 --randrepeat=1 --randseed=4242 --verify=crc32c
	--verify_fatal=1 --verify_state_save=0 --group_reporting)

log "fio: four writers with verify, through wbd"
if ! fio --name=writers --ioengine=nbd --uri="$(uri_unix disk0)" \
	--iodepth=8 "${common[@]}" --output="$T/fio.out" >/dev/null 2>&1; then
	cat "$T/fio.out" >&2 || true
	fail "fio with four writers failed or found corrupted data"
fi
grep -q 'err= 0' "$T/fio.out" || fail "fio reported an error: $(cat "$T/fio.out")"

stop_wbd
[[ $EXIT_STATUS == 0 ]] || fail "wbd exited with status $EXIT_STATUS after SIGTERM"

log "fio: verify the same blocks on the backing file"
if ! fio --name=writers --ioengine=psync --filename="$T/disk0.img" \
	--verify_only "${common[@]}" --output="$T/fio-backing.out" >/dev/null 2>&1; then
	cat "$T/fio-backing.out" >&2 || true
	fail "the backing file does not hold the blocks fio wrote"
fi
grep -q 'err= 0' "$T/fio-backing.out" ||
	fail "fio verify of the backing file reported an error: $(cat "$T/fio-backing.out")"
