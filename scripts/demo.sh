#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# demo.sh - install the dependencies, build wbd and run it in the foreground
# on a demo configuration: one 1 GiB export "disk0" backed by a sparse file,
# served on a Unix socket and on 127.0.0.1:10809.  Ctrl-C stops it.
#
# Environment: WBD_DEMO_DIR (state directory, default
# ${XDG_STATE_HOME:-$HOME/.local/state}/wbd-demo, or /var/lib/wbd-demo when
# HOME is unset), WBD_DEMO_PORT (default 10809), BUILD_DIR (default build),
# WBD_SKIP_DEPS=1 to skip the apt step.  Extra arguments go to wbd (e.g. -v).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
PORT=${WBD_DEMO_PORT:-10809}

if [[ -n ${WBD_DEMO_DIR:-} ]]; then
	DIR=$WBD_DEMO_DIR
elif [[ -n ${HOME:-} ]]; then
	DIR=${XDG_STATE_HOME:-$HOME/.local/state}/wbd-demo
else
	DIR=/var/lib/wbd-demo
fi

bash scripts/install-deps.sh

if [[ ! -f $BUILD_DIR/meson-private/coredata.dat ]]; then
	meson setup "$BUILD_DIR"
fi
ninja -C "$BUILD_DIR"
WBD=$BUILD_DIR/daemon/wbd
WBCTL=$(cd "$BUILD_DIR/client" && pwd)/wbctl

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
SOCK=$DIR/nbd.sock
CONF=$DIR/wbd.conf

cat >"$CONF" <<CONF
# wbd demo configuration, written by scripts/demo.sh.
listen = {
  tcp  = [ "127.0.0.1:$PORT" ];
  unix = [ "$SOCK" ];
};

# Its own control socket, never the packaged service's /run/wbd/control.sock:
#   $WBCTL -s $DIR/control.sock status
control = { socket = "$DIR/control.sock"; };

exports = (
  { name = "disk0"; description = "wbd demo disk";
    backing = "$DIR/disk0.img";   # created sparse on first start
    size = "1G"; readonly = false; }
);
CONF

"$WBD" --check-config -c "$CONF"

cat <<MSG

wbd is starting in the foreground (Ctrl-C stops it).
  config:  $CONF
  backing: $DIR/disk0.img (sparse, 1 GiB)

Look at it from another terminal (wbctl is in $BUILD_DIR/client; the
packaged wbd's /run/wbd/control.sock is another daemon's):
  $WBCTL -s $DIR/control.sock status

Connect from another terminal:
  nbdinfo 'nbd+unix:///disk0?socket=$SOCK'
  nbdinfo nbd://127.0.0.1:$PORT/disk0
  qemu-img info 'nbd+unix:///disk0?socket=$SOCK'
  qemu-io -f raw -c 'write -P 0xab 0 1M' -c 'read -P 0xab 0 1M' 'nbd+unix:///disk0?socket=$SOCK'
  nbdcopy /path/to/image.raw 'nbd+unix:///disk0?socket=$SOCK'
  sudo modprobe nbd && sudo nbd-client -unix $SOCK /dev/nbd0 -name disk0   # kernel block device
  sudo nbd-client -N disk0 127.0.0.1 $PORT /dev/nbd0   # ... or over TCP

MSG

exec "$WBD" -f -c "$CONF" "$@"
