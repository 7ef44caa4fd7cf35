#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The Debian package, end to end, on this machine: built by
# scripts/build-deb.sh, lintian-clean (no error or warning, where lintian
# is installed), installed with apt, it creates the wbd user and the
# wbd-admin group and /run/wbd and /var/lib/wbd; its unit's ExecStart, run
# as User=wbd would run it (setpriv with the unit's groups, UMask and
# LimitNOFILE -- systemd is not PID 1 here), serves the shipped
# configuration and says READY=1; ExecReload works as wbd; a purge removes
# /etc/wbd and keeps the backing file, saying so.
#
# It installs and purges a package on the host, so it is in the suite
# "package", which a plain "meson test" leaves out:
#   meson test -C build --suite package
# It skips unless run as root with apt, and when wbd is already installed
# or the packaged paths are in use.  The build alone takes one to two
# minutes; WBD_DEB=PATH tests a package built already.
SRCDIR=${SRCDIR:?SRCDIR must name tests/package}/../service
source "$SRCDIR/lib-service.sh"
: "${TOP:?TOP must name the source tree}"
need apt-get dpkg-deb setpriv prlimit nbdinfo
((EUID == 0)) || skip "not root: this test installs a package"
status=$(dpkg-query -W -f='${db:Status-Status}' wbd 2>/dev/null || true)
[[ $status == installed || $status == config-files ]] &&
	skip "wbd is installed on this machine; this test installs and purges its own"
[[ -e /run/wbd/control.sock || -e /run/wbd/nbd.sock ]] &&
	skip "/run/wbd is in use"
python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 10809))' 2>/dev/null ||
	skip "127.0.0.1:10809, the shipped configuration's port, is in use"

if [[ -n ${WBD_DEB:-} ]]; then
	deb=$WBD_DEB            # a package built already (iterating on this test)
else
	log "building the package (scripts/build-deb.sh)"
	start=$SECONDS
	rm -f "$TOP"/build-deb/wbd_*.deb
	bash "$TOP/scripts/build-deb.sh" >"$T/build.log" 2>&1 ||
		fail "build-deb.sh failed: $(tail -30 "$T/build.log")"
	deb=$(ls "$TOP"/build-deb/wbd_*_*.deb)
	log "built $(basename "$deb") in $((SECONDS - start)) s"
fi

if command -v lintian >/dev/null; then
	lintian --pedantic --info "$deb" >"$T/lintian.log" 2>&1 || true
	grep -E '^[EW]: ' "$T/lintian.log" &&
		fail "lintian reports errors or warnings: $(cat "$T/lintian.log")"
	log "lintian: $(grep -cE '^[IPX]: ' "$T/lintian.log" || true) info/pedantic tags, no error or warning"
else
	log "lintian is not installed: not checked"
fi

cleanup_install() {
	stop_started_daemons
	apt-get purge -y wbd >/dev/null 2>&1 || true
	rm -f /var/lib/wbd/disk0.img
	rmdir /var/lib/wbd /run/wbd 2>/dev/null || true
}
trap 'rc=$?; cleanup_install; (exit "$rc"); _cleanup' EXIT
DEBIAN_FRONTEND=noninteractive apt-get install -y "$deb" >"$T/install.log" 2>&1 ||
	fail "apt-get install failed: $(tail -20 "$T/install.log")"

getent passwd wbd >/dev/null || fail "the wbd user was not created"
id -nG wbd | grep -qw wbd-admin || fail "wbd is not in wbd-admin: $(id -nG wbd)"
[[ $(stat -c '%U %a' /run/wbd) == "wbd 755" ]] || fail "/run/wbd: $(stat -c '%U %a' /run/wbd)"
[[ $(stat -c '%U %a' /var/lib/wbd) == "wbd 750" ]] || fail "/var/lib/wbd: $(stat -c '%U %a' /var/lib/wbd)"
for f in /usr/share/doc/wbd/README.Debian \
	/usr/share/bash-completion/completions/wbctl /lib/systemd/system/wbd.socket; do
	[[ -e $f ]] || fail "the package lacks $f"
done
# Every document the installed manual pages name (docs/NAME, installed as
# /usr/share/doc/wbd/NAME) and the units' Documentation=file:// paths open
# as named: uncompressed.
docs=()
for page in /usr/share/man/man[58]/wbd*.gz /usr/share/man/man8/wbctl.8.gz; do
	mapfile -t -O "${#docs[@]}" docs < <(zcat "$page" | sed 's/\\-/-/g' |
		grep -oE 'docs/[A-Za-z0-9_.-]+\.(md|json|png)' | sed 's|^docs/|/usr/share/doc/wbd/|')
done
mapfile -t -O "${#docs[@]}" docs < <(sed -n 's|^Documentation=.*file://||p' \
	/lib/systemd/system/wbd.service /lib/systemd/system/wbd.socket)
((${#docs[@]} >= 5)) || fail "found only ${#docs[@]} documents named in the man pages and units"
for f in $(printf '%s\n' "${docs[@]}" /usr/share/doc/wbd/grafana-wbd.json | sort -u); do
	[[ -f $f ]] || fail "named in a manual page or unit but not in the package: $f"
done
log "the $(printf '%s\n' "${docs[@]}" | sort -u | wc -l) documents the man pages and units name are installed"

# The unit's commands, run as User=wbd would.
UNIT=/lib/systemd/system/wbd.service
cmd() { sed -n "s/^$1=//p" "$UNIT"; }
groups=$(id -G wbd | tr ' ' ','),$(getent group disk | cut -d: -f3)
nofile=$(cmd LimitNOFILE)
# LimitNOFILE, unless this machine's hard limit is lower and cannot be
# raised (a container without CAP_SYS_RESOURCE).
if ! prlimit --nofile="$nofile" true 2>/dev/null; then
	log "cannot raise the open file limit to $nofile here; keeping $(ulimit -Hn)"
	nofile=$(ulimit -Hn)
fi
as_wbd() {
	(umask "$(cmd UMask)" && exec prlimit --nofile="$nofile" \
		setpriv --reuid=wbd --regid=wbd --groups="$groups" "$@")
}
read -ra pre <<<"$(cmd ExecStartPre)"
read -ra start <<<"$(cmd ExecStart)"
read -ra reload <<<"$(cmd ExecReload)"
as_wbd "${pre[@]}" >"$T/pre.log" 2>&1 || fail "ExecStartPre as wbd: $(cat "$T/pre.log")"
start_notify_listener
chmod o+x "$T"
chown wbd "$NOTIFY"
_LOGS+=("$T/wbd.log")
# (a subshell that execs, so that $! is wbd's pid)
(umask "$(cmd UMask)" && NOTIFY_SOCKET=$NOTIFY exec prlimit --nofile="$nofile" \
	setpriv --reuid=wbd --regid=wbd --groups="$groups" "${start[@]}") \
	>>"$T/wbd.log" 2>&1 &
pid=$!
track_wbd "$pid"
wait_note '^READY=1$' 30
grep -q "ready" "$T/wbd.log" || fail "no ready line: $(cat "$T/wbd.log")"
[[ $(stat -c '%U' "/proc/$pid") == wbd ]] || fail "wbd does not run as wbd"
nbdinfo 'nbd+unix:///disk0?socket=/run/wbd/nbd.sock' >/dev/null ||
	fail "the shipped export is not served"
[[ $(stat -c '%U:%G %a' /run/wbd/control.sock) == "wbd:wbd-admin 660" ]] ||
	fail "control socket: $(stat -c '%U:%G %a' /run/wbd/control.sock)"
[[ $(stat -c '%U %s' /var/lib/wbd/disk0.img) == "wbd 67108864" ]] ||
	fail "backing file: $(stat -c '%U %s' /var/lib/wbd/disk0.img)"
wbctl_out=$(/usr/bin/wbctl status) || fail "wbctl status as root failed"
as_wbd "${reload[@]}" >"$T/reload.log" 2>&1 || fail "ExecReload as wbd: $(cat "$T/reload.log")"
stop_wbd "$pid" TERM 60
[[ $EXIT_STATUS == 0 ]] || fail "wbd exited with status $EXIT_STATUS"

DEBIAN_FRONTEND=noninteractive apt-get purge -y wbd >"$T/purge.log" 2>&1 ||
	fail "apt-get purge failed: $(cat "$T/purge.log")"
[[ -e /etc/wbd/wbd.conf ]] && fail "purge left /etc/wbd/wbd.conf"
[[ -f /var/lib/wbd/disk0.img ]] || fail "purge removed the backing file"
grep -q 'backing files were kept' "$T/purge.log" ||
	fail "purge did not say the backing files were kept: $(cat "$T/purge.log")"
log "built, lintian-clean, installed, served as wbd, reloaded, purged with the data kept"
