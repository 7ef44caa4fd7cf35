#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# nbds+unix:// backing: nbdkit requires TLS (a pre-shared key, so no
# certificates are needed); wbd connects through libnbd's URI support
# with tls-psk-file= (the PSK username is the URI's user, wbd@), and data
# flushed through wbd is on nbdkit.
source "${SRCDIR:-$(dirname "$0")}/lib-remote.sh"
need nbdcopy
nbdkit --dump-config | grep -qx 'tls=yes' || skip "nbdkit was built without TLS"
need_python_nbd
[[ $("$PYTHON" -c 'import nbd; print(nbd.NBD().supports_tls())') == True ]] ||
	skip "libnbd was built without TLS"

PSK=$T/keys.psk
printf 'wbd:%s\n' "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$PSK"
chmod 600 "$PSK"
start_nbdkit tls --tls=require --tls-psk="$PSK" memory 32M
TLS_URI="nbds+unix://wbd@/?socket=$KIT_SOCK&tls-psk-file=$PSK"

# Without TLS nbdkit refuses: wbd must be using it.
if nbdinfo "$(kit_uri "$KIT_SOCK")" >/dev/null 2>&1; then
	fail "nbdkit accepted a plain connection; the test proves nothing"
fi

add_remote_export disk0 "$TLS_URI"
start_wbd
head -c 8M /dev/urandom >"$T/data"
nbdcopy --flush "$T/data" "$(uri_unix disk0)" || fail "nbdcopy through wbd failed"
nbdcopy "$TLS_URI" "$T/remote" || fail "reading nbdkit over TLS failed"
cmp -n $((8 << 20)) "$T/data" "$T/remote" || fail "nbdkit does not hold the data flushed through wbd"
