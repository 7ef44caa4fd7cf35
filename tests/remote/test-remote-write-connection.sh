#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Writeback's writes to a multi-conn remote without TLS go on a connection
# of their own (daemon/backend/nbdread.c), opened as wbd starts, before
# any client comes (the read connection too): the log says so and `wbctl
# status` shows write_connection; 64 scattered writes of 64 KiB, then a
# FLUSH, leave the remote's file byte for byte what was written; a
# window deeper than remote.conn_depth (a FLUSH's 64) opens a second write
# connection for the next window to use (status: write_connections).  A write
# error the remote reports (nbdkit's error filter: EIO) reaches the
# client's FLUSH and leaves the connection up; once the remote takes
# writes again, `wbctl flush` writes the range and the file is right.
# Then nbdkit is killed while writes sit in it (its delay filter) and
# started again: the writes in flight on the dead connection stay dirty
# and are written again through libnbd (the file ends right, the log says
# the write connection failed), and the connection is reopened for later
# writes.  A reload with remote.write_connection = false closes it.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need_python_nbd
need_wbctl

MiB=$((1 << 20))
head -c $((32 * MiB)) /dev/urandom >"$T/data"
truncate -s $((32 * MiB)) "$T/remote.img"
ERRS=$T/write-errors
kit_args=(--filter=error --filter=delay file "$T/remote.img"
	error-pwrite=EIO error-pwrite-rate=100% error-pwrite-file="$ERRS")
start_nbdkit kit "${kit_args[@]}"
KIT=$KIT_SOCK
add_remote_export disk0 "$(kit_uri "$KIT")"
write_config
start_wbd

# Both connections of wbd's own are opened as the device connects, before
# any read or write: a stream's first writes do not go through libnbd
# while one opens, nor wait for the remote to set it up.
for what in "writeback's writes go" "cache misses are read"; do
	wait_log 5 "$what on a connection of their own" ||
		fail "before any client: the log does not say \"$what on a connection of their own\""
done
log "the write and read connections opened before any client came"

# write_ranges FLUSH OFF LEN [OFF LEN ...]: write $T/data's bytes of the
# ranges through wbd, all in flight together, then FLUSH if FLUSH is 1.
# Exits 3 if the FLUSH failed with EIO.
write_ranges() {
	"$PYTHON" - "$(uri_unix disk0)" "$T/data" "$@" <<'PY'
import nbd, sys
uri, path, flush = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
r = [int(x) for x in sys.argv[4:]]
data = open(path, "rb").read()
h = nbd.NBD()
h.connect_uri(uri)
cookies = [h.aio_pwrite(data[o:o + n], o) for o, n in zip(r[0::2], r[1::2])]
while h.aio_in_flight() > 0:
    h.poll(-1)
for c in cookies:
    h.aio_command_completed(c)
if flush:
    try:
        h.flush()
    except nbd.Error as e:
        if e.errno == "EIO":
            sys.exit(3)
        raise
h.shutdown()
PY
}

# remote_matches OFF LEN [OFF LEN ...]: the remote's file holds $T/data's
# bytes there.
remote_matches() {
	"$PYTHON" - "$T/remote.img" "$T/data" "$@" <<'PY'
import sys
img, data = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
r = [int(x) for x in sys.argv[3:]]
for o, n in zip(r[0::2], r[1::2]):
    if img[o:o + n] != data[o:o + n]:
        sys.exit("FAIL: the remote's bytes at %d differ" % o)
PY
}

# ranges_at BASE: 64 ranges of 64 KiB, 128 KiB apart from BASE, in a
# scrambled order.
ranges_at() {
	local i
	R=()
	for ((i = 0; i < 64; i++)); do
		R+=($(($1 + ((i * 37) % 64) * 128 * 1024)) 65536)
	done
}

ranges_at 0
write_ranges 1 "${R[@]}" || fail "writes and a FLUSH through wbd"
remote_matches "${R[@]}" || fail "the first writes"
wait_remote_field write_connection True || fail "wbctl status: write_connection is not true"
grep -q "writeback's writes go on a connection of their own" "$T/wbd.log" ||
	fail "the log does not announce the write connection"
# 64 more, 8 MiB further on, on it.
ranges_at $((8 * MiB))
write_ranges 1 "${R[@]}" || fail "writes and a FLUSH on the write connection"
remote_matches "${R[@]}" || fail "the writes on the write connection"
log "64 writes in flight together, then a FLUSH: the remote's file is right"
# A FLUSH's window of 64 is deeper than one connection takes (conn_depth,
# 16): the first window found no other idle and opened one more, for the
# next window to use.  (Without write-behind, which would write them first
# at the link's window: 16 on this remote.)
echo 'remote = { write_behind = false; };' >>"$CONF"
reload_remote
for ((i = 0; i < 10; i++)); do
	(($(remote_field write_connections) >= 2)) && break
	ranges_at $((10 * MiB + (i % 4) * 65536))
	write_ranges 1 "${R[@]}" || fail "writes and a FLUSH on the write connections"
	remote_matches "${R[@]}" || fail "the writes on the write connections"
done
n=$(remote_field write_connections)
((n >= 2)) || fail "wbctl status: write_connections is $n after $i FLUSHes of 64 writes (at most $(link_field writes_in_flight_max) in flight, write-behind wrote $(link_field write_behind_bytes) bytes, window $(link_field window_writes))"
log "a FLUSH's 64 writes: $n write connections of wbd's own"
sed -i '/^remote = { write_behind = false; };$/d' "$CONF"
kill -HUP "$WBD_PID"
for ((i = 0; i < 50; i++)); do
	[[ $(link_field write_behind) == True ]] && break
	sleep 0.1
done
[[ $(link_field write_behind) == True ]] || fail "a reload did not turn write-behind on again"

# An error the remote reports: the FLUSH's answer, the connection stays.
touch "$ERRS"
rc=0
write_ranges 1 $((16 * MiB)) 65536 || rc=$?
((rc == 3)) || fail "a FLUSH after a failed writeback: status $rc, not EIO"
rm -f "$ERRS"
remote_wbctl flush >/dev/null || fail "wbctl flush once the remote takes writes"
remote_matches $((16 * MiB)) 65536 || fail "the range written again after the error"
grep -q 'the write connection failed' "$T/wbd.log" &&
	fail "a write error the remote reported failed the write connection"
[[ $(remote_field write_connection_failures) == 0 ]] ||
	fail "a write error the remote reported counted as a write connection failure"
log "a write error: EIO to the FLUSH, written once the remote takes writes"

# The server dies with writes in it (2 s each in its delay filter), and
# comes back: they are written again.  (Started again with the delay
# first: an nbdkit with idle clients may not heed SIGTERM at once.)
stop_kit "$KIT_PID" KILL
start_nbdkit kit "${kit_args[@]}" delay-write=2
ranges_at $((20 * MiB))
write_ranges 0 "${R[@]}" || fail "writes into the cache"
for ((i = 0; i < 100; i++)); do
	(($(link_field writes_in_flight) > 0)) && break
	sleep 0.05
done
(($(link_field writes_in_flight) > 0)) || fail "no write in flight to the remote"
stop_kit "$KIT_PID" KILL
start_nbdkit kit "${kit_args[@]}"
# A flush while wbd finds its connections dead fails (ENOTCONN, the data
# kept dirty); one after the reconnection writes everything.
for ((i = 0; i < 20; i++)); do
	remote_wbctl flush >/dev/null 2>&1 && break
	sleep 0.5
done
((i < 20)) || fail "wbctl flush still fails 10 s after the remote came back"
remote_matches "${R[@]}" || fail "the writes in flight when the remote died"
grep -q 'the write connection failed' "$T/wbd.log" ||
	fail "the log does not say the write connection failed"
failures=$(remote_field write_connection_failures)
((failures >= 1)) || fail "wbctl status: write_connection_failures is $failures"
# Reopened at a write once its back-off has passed: a second after the
# first failure, doubling while none worked (the KILL before the restart
# with the delay failed it too).
for ((i = 0; i < 20; i++)); do
	write_ranges 1 $((24 * MiB + i * 4096)) 4096 || fail "a write while the write connection reopens"
	[[ $(remote_field write_connection) == True ]] && break
	sleep 0.5
done
ranges_at $((24 * MiB))
write_ranges 1 "${R[@]}" || fail "writes after the reopening"
remote_matches "${R[@]}" || fail "the writes after the reopening"
wait_remote_field write_connection True || fail "the write connection was not reopened"
log "after the restart: written again, the write connection reopened"

# Turned off by a reload: closed at the next write, which libnbd carries.
echo 'remote = { write_connection = false; };' >>"$CONF"
reload_remote
write_ranges 1 $((30 * MiB)) 65536 || fail "a write after write_connection = false"
wait_remote_field write_connection False || fail "write_connection = false left it open"
[[ $(remote_field write_connections) == 0 ]] ||
	fail "write_connection = false left $(remote_field write_connections) write connection(s) open"
remote_matches $((30 * MiB)) 65536 || fail "the write through libnbd"
log "write_connection = false by a reload: writes through libnbd"
assert_alive
