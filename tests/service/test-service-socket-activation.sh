#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Socket activation, with systemd-socket-activate playing systemd: it
# listens on the sockets of a wbd.socket-like unit and starts wbd on the
# first connection, passing them (LISTEN_FDS, LISTEN_FDNAMES).  wbd uses
# the passed socket for each configured address (listen.tcp, listen.unix,
# control.socket) instead of binding it, binds what was not passed, and
# serves a passed socket the configuration does not name too.  The client
# whose connection started wbd is served; the socket files systemd made
# are left to systemd at exit, the one wbd made is removed.
source "${SRCDIR:?SRCDIR must name tests/service}/lib-service.sh"
need systemd-socket-activate nbdinfo

OWN=$T/own.sock         # in listen.unix, not passed: wbd binds it
EXTRA=$T/extra.sock     # passed, not in listen: served all the same
add_export disk0 16M rw "activated"
PORT=$(free_port)
write_config
sed -i "s|^listen = .*|listen = { tcp = [ \"127.0.0.1:$PORT\" ]; unix = [ \"$SOCK\", \"$OWN\" ]; };|" "$CONF"

_LOGS+=("$LOG")
systemd-socket-activate -l "127.0.0.1:$PORT" -l "$SOCK" -l "$CTL" \
	-l "$EXTRA" --fdname=nbd-tcp:nbd:control:extra \
	"$WBD" -f -c "$CONF" >>"$LOG" 2>&1 &
pid=$!
track_wbd "$pid"
for ((i = 0; i < 100; i++)); do
	[[ -S $EXTRA ]] && break
	sleep 0.1
done
[[ -S $SOCK && -S $EXTRA ]] || fail "systemd-socket-activate did not listen"
grep -q 'ready' "$LOG" && fail "wbd started before any client connected"

# The first client starts wbd and is served.
nbdinfo --json "$(uri_unix disk0 "$SOCK")" >"$T/info.json" ||
	fail "the client that activated wbd was not served"
grep -q '"export-size": 16777216' "$T/info.json" ||
	fail "nbdinfo saw no 16 MiB export: $(cat "$T/info.json")"
grep -q "listening on unix $SOCK (socket from systemd)" "$LOG" ||
	fail "wbd bound $SOCK itself instead of using the passed socket"
grep -q "listening on tcp 127.0.0.1:$PORT (socket from systemd)" "$LOG" ||
	fail "wbd did not use the passed TCP socket"
grep -q "control socket $CTL (socket from systemd)" "$LOG" ||
	fail "wbd did not use the passed control socket"
grep -q "listening on unix $EXTRA (socket from systemd named extra, not in listen)" "$LOG" ||
	fail "the passed socket missing from listen is not served"
grep -q "listening on unix $OWN (mode " "$LOG" ||
	fail "wbd did not bind $OWN, which was not passed"

nbdinfo "$(uri_tcp disk0)" >/dev/null || fail "not served on the passed TCP socket"
nbdinfo "$(uri_unix disk0 "$EXTRA")" >/dev/null || fail "not served on $EXTRA"
nbdinfo "$(uri_unix disk0 "$OWN")" >/dev/null || fail "not served on $OWN"
expect_exit 0 wbctl status

stop_wbd "$pid" TERM 30
[[ $EXIT_STATUS == 0 ]] || fail "wbd exited with status $EXIT_STATUS"
[[ -S $SOCK && -S $EXTRA && -S $CTL ]] ||
	fail "wbd removed a socket file that belongs to the socket unit"
[[ -e $OWN ]] && fail "wbd left its own socket $OWN behind"
log "activated by its first client; passed, configured and own sockets all served"
