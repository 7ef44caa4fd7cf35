# SPDX-License-Identifier: GPL-2.0-or-later
# lib-metrics.sh - helpers for the metrics tests.  Sourced, not run.
#
# Builds on ../remote/lib-remote.sh (and so ../integration/lib.sh: $T,
# $CONF, $LOG, start_wbd, fail...): some tests put a remote export behind
# nbdkit so that every family has samples.  Adds:
#   MPY                  the system python3, which has libnbd's bindings
#                        and python3-prometheus-client; metrics.py (in this
#                        directory) is importable from it
#   need_prometheus      skip without python3-prometheus-client
#   add_metrics_listen [KEYS]
#                        metrics = { listen = "127.0.0.1:$MPORT"; KEYS } in
#                        $CONF
#   start_local_and_remote [http]
#                        start wbd with export disk0 (a 16M local file),
#                        r0 (nbdkit's 16M memory disk, a remote device) and
#                        j0 (a 16M local file with a write log), so that
#                        every family has samples; with "http", the HTTP
#                        endpoint too
#   wbctl ARGS...        wbctl on the control socket of write_config
#
# Environment: WBD, WBCTL (set by meson), SRCDIR (this directory).

: "${SRCDIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
source "$SRCDIR/../remote/lib-remote.sh"

MPY=/usr/bin/python3
[[ -x $MPY ]] || MPY=python3
export PYTHONPATH=$SRCDIR${PYTHONPATH:+:$PYTHONPATH}

need_prometheus() {
	"$MPY" -c 'import prometheus_client.parser' 2>/dev/null ||
		skip "python3-prometheus-client is not installed"
}

MPORT=
add_metrics_listen() {
	MPORT=$(free_port)
	echo "metrics = { listen = \"127.0.0.1:$MPORT\"; ${1:-} };" >>"$CONF"
}

start_local_and_remote() {
	start_nbdkit kit memory 16M
	add_export disk0 16M rw
	add_remote_export r0 "$(kit_uri "$KIT_SOCK")"
	_EXPORTS+=("  { name = \"j0\"; backing = \"$T/j0.img\"; size = \"16M\"; journal = { path = \"$T/j0.wal\"; size = \"2M\"; }; }")
	write_config
	[[ ${1:-} == http ]] && add_metrics_listen
	start_wbd
}

wbctl() {
	"$WBCTL" -s "$T/control.sock" "$@"
}
