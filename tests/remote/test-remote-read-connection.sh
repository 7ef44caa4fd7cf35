#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Cache misses to a multi-conn remote without TLS are read on a connection
# of their own (daemon/backend/nbdread.c): the log says so and `wbctl
# status` shows read_connection; 64 reads of 64 KiB in flight together, out of order,
# return the remote's bytes.  A read error the remote reports (nbdkit's
# error filter: EIO) is that read's answer and leaves the connection up;
# the next read of the range succeeds.  Then nbdkit is killed and started
# again: the read in flight on the dead connection is read again through
# libnbd (correct data, the log says the read connection failed), and the
# read connection is reopened for later misses.  A reload with
# remote.read_connection = false closes it.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl

MiB=$((1 << 20))
head -c $((32 * MiB)) /dev/urandom >"$T/data"
cp "$T/data" "$T/remote.img"
ERRS=$T/read-errors
kit_args=(--filter=error file "$T/remote.img" error-pread=EIO
	error-pread-rate=100% error-pread-file="$ERRS")
start_nbdkit kit "${kit_args[@]}"
KIT=$KIT_SOCK
add_remote_export disk0 "$(kit_uri "$KIT")"
write_config
start_wbd

# read_check OFF LEN [OFF LEN ...]: read the ranges through wbd, all in
# flight together, and compare them with the data.
read_check() {
	"$PYTHON" - "$(uri_unix disk0)" "$T/data" "$@" <<'PY'
import nbd, sys
uri, path = sys.argv[1:3]
r = [int(x) for x in sys.argv[3:]]
ranges = list(zip(r[0::2], r[1::2]))
data = open(path, "rb").read()
h = nbd.NBD()
h.connect_uri(uri)
bufs = [nbd.Buffer(n) for _, n in ranges]
cookies = [h.aio_pread(b, o) for b, (o, _) in zip(bufs, ranges)]
while h.aio_in_flight() > 0:
    h.poll(-1)
for c in cookies:
    h.aio_command_completed(c)
for b, (o, n) in zip(bufs, ranges):
    if b.to_bytearray() != data[o:o + n]:
        sys.exit("FAIL: wrong data at %d" % o)
h.shutdown()
PY
}

# 64 reads of 64 KiB, 128 KiB apart, in a scrambled order (no
# read-ahead: not sequential).
ranges=()
for ((i = 0; i < 64; i++)); do
	ranges+=($((((i * 37) % 64) * 128 * 1024)) 65536)
done
read_check "${ranges[@]}" || fail "reads through the read connection"
wait_remote_field read_connection True || fail "wbctl status: read_connection is not true"
grep -q 'cache misses are read on a connection of their own' "$T/wbd.log" ||
	fail "the log does not announce the read connection"
# The first misses may have gone through libnbd while it opened: 64 more,
# 8 MiB further on, on it.
ranges2=()
for ((i = 0; i < ${#ranges[@]}; i += 2)); do
	ranges2+=($((ranges[i] + 8 * MiB)) "${ranges[i + 1]}")
done
read_check "${ranges2[@]}" || fail "reads on the read connection"
log "64 misses in flight together: the remote's bytes"

# An error the remote reports: that read's answer, the connection stays.
touch "$ERRS"
"$PYTHON" - "$(uri_unix disk0)" $((16 * MiB)) <<'PY' || fail "a read error was not reported"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
try:
    h.pread(65536, int(sys.argv[2]))
    sys.exit("FAIL: the read succeeded while the remote fails reads")
except nbd.Error as e:
    if e.errno != "EIO":     # libnbd gives the errno name
        sys.exit("FAIL: %s, not EIO" % e)
h.shutdown()
PY
rm -f "$ERRS"
read_check $((16 * MiB)) 65536 || fail "the read after the error"
grep -q 'the read connection failed' "$T/wbd.log" &&
	fail "a read error the remote reported failed the read connection"
[[ $(remote_field read_connection_failures) == 0 ]] ||
	fail "a read error the remote reported counted as a read connection failure"
log "a read error: EIO to the client, the next read of the range succeeds"

# The server dies and comes back: the read is read again through libnbd.
stop_kit "$KIT_PID" KILL
start_nbdkit kit "${kit_args[@]}"
read_check $((20 * MiB)) 65536 $((21 * MiB)) 4096 ||
	fail "reads after the remote was restarted"
grep -q 'the read connection failed' "$T/wbd.log" ||
	fail "the log does not say the read connection failed"
failures=$(remote_field read_connection_failures)
((failures >= 1)) || fail "wbctl status: read_connection_failures is $failures"
# Reopened a second after it failed, at the next miss.
sleep 1.2
read_check $((24 * MiB)) 65536 || fail "a read after the reopening"
wait_remote_field read_connection True || fail "the read connection was not reopened"
log "after the restart: read again through libnbd, the read connection reopened"

# Turned off by a reload: closed at the next miss, which libnbd reads.
echo 'remote = { read_connection = false; };' >>"$CONF"
reload_remote
read_check $((28 * MiB)) 65536 || fail "a read after read_connection = false"
wait_remote_field read_connection False || fail "read_connection = false left it open"
log "read_connection = false by a reload: misses through libnbd"
assert_alive
