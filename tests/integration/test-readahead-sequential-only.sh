#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Read-ahead on a file backing opened with O_DIRECT (readahead.py says what
# is checked): sequential reads are read ahead, once; random reads are not;
# dirty data stays.  A file read through the host's page cache gets the
# kernel's read-ahead, so wbd reads nothing ahead for it: a sequential pass
# over the second export leaves the pages read ahead where they were.
# tests/remote/test-remote-readahead.sh does the same on a remote.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

head -c 80M /dev/urandom >"$T/disk0.img"
head -c 32M /dev/urandom >"$T/disk1.img"
_EXPORTS=("  { name = \"disk0\"; backing = \"$T/disk0.img\"; direct = true; }"
	"  { name = \"disk1\"; backing = \"$T/disk1.img\"; }")
write_cache_config 64M 'dirty_background_ratio = 50; dirty_ratio = 80; dirty_writeback_centisecs = 0;'
sed -i 's/^cache = { size = "64M"; page_size = "4K"; };/cache = { size = "64M"; page_size = "4K"; readahead_bytes = "4M"; };/' "$CONF"
grep -q 'readahead_bytes = "4M"' "$CONF" || fail "could not turn read-ahead on in $CONF"
start_wbd
"$PYTHON" "$SRCDIR/readahead.py" "$(uri_unix disk0)" "$WBCTL" \
	"$T/control.sock" "$T/disk0.img" || fail "see above"

ahead() { "$WBCTL" -s "$T/control.sock" status --json | jq -e '.cache.readahead_bytes'; }
before=$(ahead) || fail "no cache.readahead_bytes in wbctl status --json"
((before > 0)) || fail "nothing was read ahead on the O_DIRECT export"
nbdcopy "$(uri_unix disk1)" "$T/copy1.img" || fail "nbdcopy from disk1 failed"
cmp "$T/disk1.img" "$T/copy1.img" || fail "disk1 read back wrong"
after=$(ahead) || fail "no cache.readahead_bytes in wbctl status --json"
((after == before)) ||
	fail "a sequential pass over a buffered file was read ahead by wbd ($before -> $after bytes)"
log "read ahead: $before bytes on the O_DIRECT export, none more on the buffered one"
assert_alive
