#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Read-ahead on a remote backing, through the device's read window
# (../integration/readahead.py says what is checked): sequential reads are
# read ahead, once; random reads are not; dirty data stays.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd

head -c 80M /dev/urandom >"$T/data"
start_nbdkit kit memory 80M
"$PYTHON" -c 'import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1])
d = open(sys.argv[2], "rb").read()
for o in range(0, len(d), 8 << 20):
    h.pwrite(d[o:o + (8 << 20)], o)
h.flush(); h.shutdown()' "$(kit_uri "$KIT_SOCK")" "$T/data"
add_remote_export disk0 "$(kit_uri "$KIT_SOCK")"
write_cache_config 64M 'dirty_background_ratio = 50; dirty_ratio = 80; dirty_writeback_centisecs = 0;'
sed -i 's/^cache = { size = "64M"; page_size = "4K"; };/cache = { size = "64M"; page_size = "4K"; readahead_bytes = "4M"; };/' "$CONF"
grep -q 'readahead_bytes = "4M"' "$CONF" || fail "could not turn read-ahead on in $CONF"
# Dirty data waits for a FLUSH: no write-behind.
add_remote_settings 'write_behind = false;'
start_wbd
"$PYTHON" "$SRCDIR/../integration/readahead.py" "$(uri_unix disk0)" \
	"$WBCTL" "$T/control.sock" "$T/data" || fail "see above"
assert_alive
