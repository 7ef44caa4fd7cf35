#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# fio's nbd engine writes random blocks with crc32c checksums and verifies
# them, over TCP and over the Unix socket, with 4 KiB and 64 KiB blocks and
# several requests in flight.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need fio
fio --enghelp 2>/dev/null | grep -qw nbd || skip "this fio has no nbd engine"

add_export disk0 64M rw
start_wbd

run_fio() {
	local uri=$1 bs=$2 size=$3 name=$4
	log "fio $name: $uri bs=$bs size=$size"
	if ! fio --name="$name" --ioengine=nbd --uri="$uri" \
		--rw=randwrite --bs="$bs" --size="$size" --iodepth=16 \
		--verify=crc32c --verify_fatal=1 --do_verify=1 --verify_state_save=0 \
		--output="$T/fio-$name.out" >/dev/null 2>&1; then
		cat "$T/fio-$name.out" >&2 || true
		fail "fio $name ($uri, bs=$bs) failed or found corrupted data"
	fi
	grep -q 'err= 0' "$T/fio-$name.out" ||
		fail "fio $name reported an error: $(cat "$T/fio-$name.out")"
}

run_fio "$(uri_tcp disk0)" 4k 16M tcp-4k
run_fio "$(uri_tcp disk0)" 64k 64M tcp-64k
run_fio "$(uri_unix disk0)" 4k 16M unix-4k
run_fio "$(uri_unix disk0)" 64k 64M unix-64k

# Mixed reads and writes with a final verification pass.
log "fio mixed randrw"
fio --name=mixed --ioengine=nbd --uri="$(uri_unix disk0)" --rw=randrw \
	--bs=16k --size=32M --iodepth=8 --verify=crc32c --verify_fatal=1 \
	--verify_state_save=0 \
	--output="$T/fio-mixed.out" >/dev/null 2>&1 ||
	fail "fio randrw with verify failed: $(cat "$T/fio-mixed.out")"
assert_alive
