#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A remote export's own base:allocation passes through wbd: nbdinfo --map
# through wbd shows the holes and data of the nbdkit file behind it, a
# write still in wbd's cache is data there before it reaches the remote,
# and nbdcopy out of wbd keeps the copy sparse.  A remote that serves no
# base:allocation (nbdkit's noextents filter) is all data.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need nbdinfo nbdcopy cmp

MiB=$((1 << 20))
IMG=$T/remote.img
truncate -s 32M "$IMG"
head -c 1M /dev/urandom | dd of="$IMG" bs=1M seek=4 conv=notrunc status=none
start_nbdkit file file "$IMG"
FILE=$KIT_SOCK
start_nbdkit noext --filter=noextents memory 16M
NOEXT=$KIT_SOCK
add_remote_export disk0 "$(kit_uri "$FILE")"
add_remote_export noext "$(kit_uri "$NOEXT")"
write_cache_config 64M 'dirty_background_ratio = 80; dirty_ratio = 90; dirty_writeback_centisecs = 0;'
# Dirty data waits for a FLUSH: no write-behind.
add_remote_settings 'write_behind = false;'
start_wbd
U=$(uri_unix disk0)

expect_map "$U" base:allocation 0 3 "the remote's first hole"
expect_map "$U" base:allocation $((4 * MiB)) 0 "the remote's data"
expect_map "$U" base:allocation $((5 * MiB)) 3 "the remote's hole after it"
expect_map "$(uri_unix noext)" base:allocation 0 0 "a remote without base:allocation"

log "a write in wbd's cache, not yet on the remote"
"$PYTHON" -c 'import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1])
h.pwrite(b"\x5a" * 65536, 20 << 20); h.shutdown()' "$U"
expect_map "$(kit_uri "$FILE")" base:allocation $((20 * MiB)) 3 "the remote itself, before the flush"
expect_map "$U" base:allocation $((20 * MiB)) 0 "the write, through wbd"
expect_map "$U" wbd:dirty $((20 * MiB)) 1 "the write, through wbd"

log "nbdcopy out keeps the copy sparse"
nbdcopy "$U" "$T/copy.img" || fail "nbdcopy failed"
alloc_kib=$(( $(stat -c '%b * %B' "$T/copy.img") / 1024 ))
log "the copy allocates $alloc_kib KiB of 32768"
((alloc_kib < 4096)) || fail "the copy allocates $alloc_kib KiB: the holes were copied"
"$PYTHON" -c 'import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1]); h.flush(); h.shutdown()' "$U"
cmp "$IMG" "$T/copy.img" || fail "the copy differs from the remote's file"
assert_alive
