#!/usr/bin/env bash
# Read-ahead on a file backing (readahead.py says what is checked):
# sequential reads are read ahead, once; random reads are not; dirty data
# stays.  tests/remote/test-remote-readahead.sh does the same on a remote.
source "${SRCDIR:-$(dirname "$0")}/lib.sh"
need_python_nbd

head -c 80M /dev/urandom >"$T/disk0.img"
add_export disk0 80M rw "" "$T/disk0.img"
write_cache_config 64M 'dirty_background_ratio = 50; dirty_ratio = 80; dirty_writeback_centisecs = 0;'
sed -i 's/^cache = { size = "64M"; page_size = "4K"; };/cache = { size = "64M"; page_size = "4K"; readahead_bytes = "4M"; };/' "$CONF"
grep -q 'readahead_bytes = "4M"' "$CONF" || fail "could not turn read-ahead on in $CONF"
start_wbd
"$PYTHON" "$SRCDIR/readahead.py" "$(uri_unix disk0)" "$WBCTL" \
	"$T/control.sock" "$T/disk0.img" || fail "see above"
assert_alive
