#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# guest-init.sh - PID 1 of the VM test's guest (tests/vm/test-vm-kernel-client.sh
# copies it into the initramfs as /init).  Runs under busybox sh.
#
# It loads nbd.ko and ext4, starts wbd on a sparse backing file in a tmpfs,
# and drives the kernel's NBD client through nbd-client, once over netlink
# and once over the old ioctl interface:
#
#   attach; raw write, read-back compare; mkfs.ext4; files with checksums,
#   more of them than the cache holds; sync; detach; re-attach; verify;
#   more files; sync; kill -9 wbd with the file system mounted; restart wbd
#   on the same backing; re-attach; replay the journal (mount, umount);
#   e2fsck -fn; verify every synced file.
#
# Then with a write log (run_journal): wbd with the export journaled in
# front of a second wbd as its remote; ext4, files, sync; the remote
# stopped, more files synced (only in the log), kill -9; wbd restarted
# before the remote; the log replayed once it answers; e2fsck -fn; verify.
#
# Then over TLS: wbd with tls.mode "require" and verify_peer; a plain attach
# and one without a client certificate are refused; an attach with
# nbd-client's -certfile/-keyfile/-cacertfile (its TLS proxy process carries
# the kernel's socket); raw write, read-back compare; detach.  "SKIP tls:
# REASON" instead when the guest's nbd-client or the host cannot do TLS.
#
# Every step prints "WBD-VM: STEP ..."; the last line is "WBD-VM: PASS" or
# "WBD-VM: FAIL <reason>", then the guest powers off.  The host reads the
# serial console's log.  Settings come from /etc/vm-test.env.

export PATH=/usr/sbin:/usr/bin:/sbin:/bin
umask 022

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs -o mode=1777 tmpfs /tmp
mkdir -p /run/wbd /data /mnt
exec </dev/null >/dev/console 2>&1

# shellcheck source=/dev/null
. /etc/vm-test.env

PORT=10809
CONF=/etc/wbd.conf
TLS_DIR=/etc/wbd-tls	# pki/: the server's files; client/: the client's
# TLS_OPTS: nbd-client's TLS options, for every connection (empty: plain).
TLS_OPTS=
CTL=/run/wbd/control.sock
WBD_LOG=/tmp/wbd.log
WBD_PID=

say() { echo "WBD-VM: $*"; }

poweroff_now() {
	sync
	poweroff -f
	sleep 5
	echo o >/proc/sysrq-trigger	# if poweroff -f did not take
}

# fail REASON: show what may explain it, print the FAIL marker, power off.
fail() {
	echo "--- wbd log (last 40 lines) ---"
	tail -n 40 "$WBD_LOG" 2>/dev/null
	echo "--- kernel log (last 40 lines) ---"
	dmesg | tail -n 40
	say "FAIL $*"
	poweroff_now
}

step() { say "STEP $* (uptime $(cut -d' ' -f1 /proc/uptime) s)"; }

# must DESCRIPTION COMMAND...: run COMMAND, fail with DESCRIPTION if it fails.
must() {
	d=$1
	shift
	"$@" || fail "$d (exit status $?)"
}

# ---------------------------------------------------------------- modules
step "loading modules: $(tr '\n' ' ' </etc/vm-modules)"
while read -r m; do
	# crc32c-intel is refused by a CPU without SSE 4.2; crc32c_generic
	# stands in for it.
	insmod "/lib/modules/$m" 2>/dev/null || echo "insmod $m failed (continuing)"
done </etc/vm-modules
[ -d /sys/module/nbd ] || fail "nbd.ko did not load"
grep -qw ext4 /proc/filesystems || fail "ext4 is not available"
ip link set lo up || fail "cannot bring up the loopback interface"

mount -t tmpfs -o "size=${BACKING_TMPFS_MIB}m" tmpfs /data ||
	fail "cannot mount the tmpfs for the backing file"

cat >"$CONF" <<EOF
# written by guest-init.sh
listen = { tcp = [ "127.0.0.1:$PORT" ]; };
cache = { size = "${CACHE_MIB}M"; page_size = "4K"; };
control = { socket = "$CTL"; };
default_export = "disk0";
exports = (
  { name = "disk0"; backing = "/data/disk0.img"; size = "${DISK_MIB}M"; }
);
EOF
{
	cat "$CONF"
	echo "tls = { mode = \"require\"; certificates = \"$TLS_DIR/pki\"; verify_peer = true; };"
} >"$CONF.tls"

# The write-log mode (run_journal): a "remote", a second wbd serving the
# backing file writethrough on a Unix socket, and in front of it wbd with
# the export journaled.  Its cache holds what is written while the remote
# is down (writers are held at the dirty limit until writeback can go on),
# and its log all of it (a full log falls back to the remote: down, the
# FLUSH would fail).
BACK_SOCK=/tmp/back.sock
cat >"$CONF.back" <<EOF
# written by guest-init.sh: the remote of the write-log mode
listen = { unix = [ "$BACK_SOCK" ]; };
cache = { size = "16M"; page_size = "4K"; };
control = { socket = "/tmp/back.ctl"; };
exports = (
  { name = "disk0"; backing = "/data/disk0.img"; size = "${DISK_MIB}M"; cache_mode = "writethrough"; }
);
EOF
cat >"$CONF.journal" <<EOF
# written by guest-init.sh: wbd with a write log, in front of the remote
listen = { tcp = [ "127.0.0.1:$PORT" ]; };
cache = { size = "128M"; page_size = "4K"; };
writeback = { dirty_background_ratio = 50; dirty_ratio = 60; };
control = { socket = "$CTL"; };
remote = { connect_timeout_ms = 1000; reconnect_max_ms = 500; };
default_export = "disk0";
exports = (
  { name = "disk0"; backing = "nbd+unix:///disk0?socket=$BACK_SOCK";
    journal = { path = "/data/disk0.wal"; size = "256M"; }; }
);
EOF

# ------------------------------------------------------------- the daemon
# start_wbd [CONFIG]: start wbd (default config $CONF), wait until it serves.
start_wbd() {
	wbd -f -c "${1:-$CONF}" >>"$WBD_LOG" 2>&1 &
	WBD_PID=$!
	i=0
	# Ready once it lists its exports: the listener and the export are up.
	# shellcheck disable=SC2086 # TLS_OPTS is a list of options
	until nbd-client -l 127.0.0.1 "$PORT" $TLS_OPTS 2>/dev/null | grep -qx disk0; do
		kill -0 "$WBD_PID" 2>/dev/null || fail "wbd exited during start-up"
		i=$((i + 1))
		[ "$i" -lt 600 ] || fail "wbd did not list its export after 600 tries"
		sleep 0.1
	done
}

stop_wbd() {
	kill -TERM "$WBD_PID"
	i=0
	while [ -d "/proc/$WBD_PID" ] && ! grep -q '^State:.*Z' "/proc/$WBD_PID/status"; do
		i=$((i + 1))
		[ "$i" -lt 1200 ] || fail "wbd still runs 120 s after SIGTERM"
		sleep 0.1
	done
	wait "$WBD_PID"
	rc=$?
	[ "$rc" -eq 0 ] || fail "wbd exited with status $rc after SIGTERM"
	WBD_PID=
	check_wbd_log
}

# check_wbd_log: a sanitizer report (a build with -Db_sanitize) fails.
check_wbd_log() {
	! grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$WBD_LOG" ||
		fail "$MODE: a sanitizer report in wbd's log"
}

# ---------------------------------------------------------- the NBD device
# attach DEV [default]: connect DEV to wbd's disk0 in $MODE (netlink,
# ioctl, or tls: netlink with $TLS_OPTS); with "default", by the empty
# export name (no -N), which default_export makes disk0.
attach() {
	dev=$1
	name="-N disk0"
	[ "${2:-}" = default ] && name=
	# shellcheck disable=SC2086 # TLS_OPTS and name are lists of options
	if [ "$MODE" = ioctl ]; then
		must "nbd-client (ioctl) $dev" \
			nbd-client 127.0.0.1 "$PORT" "$dev" $name -b 4096 -L
	else
		must "nbd-client ($MODE) $dev" \
			nbd-client 127.0.0.1 "$PORT" "$dev" $name -b 4096 $TLS_OPTS
	fi
	sz=/sys/block/${dev#/dev/}/size
	i=0
	while [ "$(cat "$sz")" = 0 ]; do
		i=$((i + 1))
		[ "$i" -lt 300 ] || fail "$dev has no size 30 s after nbd-client"
		sleep 0.1
	done
	[ "$(cat "$sz")" -eq $((DISK_MIB * 2048)) ] ||
		fail "$dev has $(cat "$sz") sectors, not $((DISK_MIB * 2048))"
}

# detach DEV: disconnect it and wait until the kernel lets it go.
detach() {
	dev=$1
	nbd-client -d "$dev" || fail "nbd-client -d $dev (exit status $?)"
	i=0
	while [ -e "/sys/block/${dev#/dev/}/pid" ] ||
	    [ "$(cat "/sys/block/${dev#/dev/}/size")" != 0 ]; do
		i=$((i + 1))
		[ "$i" -lt 300 ] || fail "$dev still connected 30 s after nbd-client -d"
		sleep 0.1
	done
}

# write_files PREFIX COUNT SUMS: COUNT files of FILE_MIB random MiB in /mnt;
# each is made and hashed in /tmp (RAM) first, so SUMS holds the SHA-256 of
# the data itself, never of something read back through the device.
write_files() {
	n=1
	while [ "$n" -le "$2" ]; do
		f=$1$n
		head -c $((FILE_MIB * 1048576)) /dev/urandom >"/tmp/$f" &&
			(cd /tmp && sha256sum "$f") >>"$3" &&
			cp "/tmp/$f" "/mnt/$f" || fail "writing /mnt/$f"
		rm -f "/tmp/$f"
		n=$((n + 1))
	done
}

# verify_files SUMS REASON: every file in SUMS reads back from the device
# (not from the page cache) as it was written, or fail with REASON.
verify_files() {
	echo 3 >/proc/sys/vm/drop_caches
	(cd /mnt && sha256sum -c -s "$1") || {
		(cd /mnt && sha256sum -c "$1")
		fail "$2"
	}
}

# raw_check DEV MIB: MIB random MiB written to DEV (after its first MiB)
# read back identical once the page cache is dropped.
raw_check() {
	head -c $(($2 * 1048576)) /dev/urandom >/tmp/raw
	must "raw write to $1" \
		dd if=/tmp/raw of="$1" bs=1M seek=1 conv=fsync 2>/dev/null
	must "flushing $1's buffers" blockdev --flushbufs "$1"
	echo 3 >/proc/sys/vm/drop_caches
	dd if="$1" bs=1M skip=1 count="$2" 2>/dev/null | cmp -s - /tmp/raw ||
		fail "$MODE: raw read-back differs from what was written"
	rm -f /tmp/raw
}

# ------------------------------------------------------------- one mode
run_mode() {
	MODE=$1
	dev=$2
	dev2=$3
	sums=/tmp/sums-$MODE
	rm -f /data/disk0.img "$sums" "$sums-b"
	: >"$WBD_LOG"

	step "$MODE: start wbd (cache ${CACHE_MIB} MiB, disk ${DISK_MIB} MiB)"
	start_wbd
	step "$MODE: attach $dev"
	attach "$dev"

	step "$MODE: raw write of ${RAW_MIB} MiB, read-back compare"
	raw_check "$dev" "$RAW_MIB"

	step "$MODE: mkfs.ext4"
	must "mkfs.ext4 $dev" mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$dev"
	must "mount $dev" mount -t ext4 "$dev" /mnt
	step "$MODE: write $FILES files of $FILE_MIB MiB ($((FILES * FILE_MIB)) MiB, cache $CACHE_MIB MiB)"
	write_files a "$FILES" "$sums"
	sync
	must "umount /mnt" umount /mnt
	step "$MODE: detach, re-attach by the default export (no -N), verify"
	detach "$dev"
	attach "$dev" default
	must "mount $dev after re-attaching" mount -t ext4 "$dev" /mnt
	verify_files "$sums" "$MODE: a file differs after detach and re-attach"

	step "$MODE: write $KILL_FILES more files, sync, kill -9 wbd with the file system mounted"
	write_files b "$KILL_FILES" "$sums-b"
	sync
	echo "wbctl status before kill -9: $(wbctl -s "$CTL" status 2>&1 | grep -m 1 dirty)"
	kill -KILL "$WBD_PID"
	wait "$WBD_PID"
	WBD_PID=
	check_wbd_log
	# The device is dead: unmounting writes nothing that can land.
	umount /mnt 2>/dev/null || umount -l /mnt
	nbd-client -d "$dev" >/dev/null 2>&1

	step "$MODE: restart wbd on the same backing, attach $dev2"
	start_wbd
	attach "$dev2"
	step "$MODE: replay the journal (mount, umount), e2fsck -fn"
	must "mount $dev2 after kill -9" mount -t ext4 "$dev2" /mnt
	must "umount /mnt" umount /mnt
	e2fsck -fn "$dev2" >/tmp/fsck.out 2>&1 || {
		cat /tmp/fsck.out
		fail "$MODE: e2fsck -fn found errors after kill -9 and restart"
	}
	step "$MODE: verify every synced file"
	must "mount $dev2" mount -t ext4 -o ro "$dev2" /mnt
	verify_files "$sums" "$MODE: a file written before the re-attach differs after kill -9"
	verify_files "$sums-b" "$MODE: a file synced before kill -9 differs after the restart"
	must "umount /mnt" umount /mnt
	detach "$dev2"
	step "$MODE: stop wbd (SIGTERM)"
	stop_wbd
	say "OK $MODE"
}

# refused DEV WHAT OPTION...: nbd-client with OPTIONs must not attach DEV.
refused() {
	dev=$1
	what=$2
	shift 2
	if timeout 120 nbd-client 127.0.0.1 "$PORT" "$dev" -N disk0 -b 4096 "$@" \
	    >/tmp/refused.out 2>&1; then
		cat /tmp/refused.out
		fail "tls: $what attached $dev under tls.mode require"
	fi
	# nbd-client's messages, on one line (they may not end with a newline).
	echo "$what, refused: $(tr '\n' ' ' </tmp/refused.out)"
	[ "$(cat "/sys/block/${dev#/dev/}/size")" = 0 ] ||
		fail "tls: $dev has a size after $what was refused"
}

# ------------------------------------------------------------------- TLS
# run_tls DEV: the kernel's client over TLS, with a client certificate.
run_tls() {
	MODE=tls
	dev=$1
	if ! nbd-client -h 2>&1 | grep -q -- -certfile; then
		say "SKIP tls: this nbd-client has no TLS options (built without GnuTLS)"
		return
	fi
	if [ -n "${TLS_SKIP:-}" ]; then
		say "SKIP tls: $TLS_SKIP"
		return
	fi
	rm -f /data/disk0.img
	: >"$WBD_LOG"
	ca=$TLS_DIR/client/ca-cert.pem
	step "tls: start wbd (tls.mode require, verify_peer, disk ${DISK_MIB} MiB)"
	TLS_OPTS="-certfile $TLS_DIR/client/client-cert.pem -keyfile $TLS_DIR/client/client-key.pem -cacertfile $ca -tlshostname localhost"
	start_wbd "$CONF.tls"
	step "tls: a plain attach and one without a client certificate are refused"
	refused "$dev" "a plain nbd-client"
	refused "$dev" "nbd-client without a client certificate" \
		-enable-tls -cacertfile "$ca" -tlshostname localhost
	step "tls: attach $dev with -certfile, -keyfile, -cacertfile"
	attach "$dev"
	grep 'TLS up' "$WBD_LOG" | tail -n 1
	step "tls: raw write of ${TLS_RAW_MIB} MiB, read-back compare"
	raw_check "$dev" "$TLS_RAW_MIB"
	step "tls: sync, detach, stop wbd (SIGTERM)"
	sync
	detach "$dev"
	TLS_OPTS=
	stop_wbd
	say "OK tls"
}

# ------------------------------------------------------------- write log
BACK_LOG=/tmp/wbd-back.log
BACK_PID=

# start_back: the remote of the write-log mode; wait until it serves.
start_back() {
	wbd -f -c "$CONF.back" >>"$BACK_LOG" 2>&1 &
	BACK_PID=$!
	i=0
	until grep -q 'ready:' "$BACK_LOG"; do
		kill -0 "$BACK_PID" 2>/dev/null || fail "the remote wbd exited during start-up"
		i=$((i + 1))
		[ "$i" -lt 600 ] || fail "the remote wbd did not start"
		sleep 0.1
	done
}

# run_journal DEV DEV2: ext4 on the export with a write log; files synced;
# the remote stopped, more files synced (only in the log now), then wbd
# killed with SIGKILL; wbd started again (its export waits for the remote),
# then the remote; the log is replayed; e2fsck -fn and every synced file
# checked.
run_journal() {
	MODE=journal
	dev=$1
	dev2=$2
	sums=/tmp/sums-journal
	rm -f /data/disk0.img /data/disk0.wal "$sums" "$sums-b"
	: >"$WBD_LOG"
	: >"$BACK_LOG"
	step "journal: start the remote (a wbd, writethrough) and wbd with a write log in front"
	start_back
	start_wbd "$CONF.journal"
	attach "$dev"
	step "journal: mkfs.ext4, $FILES files, sync"
	must "mkfs.ext4 $dev" mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$dev"
	must "mount $dev" mount -t ext4 "$dev" /mnt
	write_files a "$FILES" "$sums"
	sync
	step "journal: stop the remote; $KILL_FILES more files, sync (answered from the log); kill -9 wbd"
	kill -TERM "$BACK_PID"
	wait "$BACK_PID"
	BACK_PID=
	write_files b "$KILL_FILES" "$sums-b"
	sync
	wbctl -s "$CTL" status --json 2>&1 | tr ',' '\n' | grep -E '"(commits|fallbacks|records|used_bytes|dirty_bytes)"' | tr '\n' ' '
	echo
	kill -KILL "$WBD_PID"
	wait "$WBD_PID"
	WBD_PID=
	check_wbd_log
	umount /mnt 2>/dev/null || umount -l /mnt
	nbd-client -d "$dev" >/dev/null 2>&1
	step "journal: start wbd with the remote still down, then the remote"
	wbd -f -c "$CONF.journal" >>"$WBD_LOG" 2>&1 &
	WBD_PID=$!
	i=0
	until grep -q 'does not answer' "$WBD_LOG"; do
		kill -0 "$WBD_PID" 2>/dev/null || fail "wbd exited at start-up with its remote down"
		i=$((i + 1))
		[ "$i" -lt 300 ] || fail "wbd did not say its export waits for its remote"
		sleep 0.1
	done
	start_back
	i=0
	until nbd-client -l 127.0.0.1 "$PORT" 2>/dev/null | grep -qx disk0; do
		i=$((i + 1))
		[ "$i" -lt 600 ] || fail "the journaled export was not served once its remote answered"
		sleep 0.1
	done
	grep 'write log .*replayed' "$WBD_LOG" || fail "journal: the log was not replayed"
	attach "$dev2"
	step "journal: replay ext4's journal (mount, umount), e2fsck -fn, verify every synced file"
	must "mount $dev2 after kill -9" mount -t ext4 "$dev2" /mnt
	must "umount /mnt" umount /mnt
	e2fsck -fn "$dev2" >/tmp/fsck.out 2>&1 || {
		cat /tmp/fsck.out
		fail "journal: e2fsck -fn found errors after kill -9 and the replay"
	}
	must "mount $dev2" mount -t ext4 -o ro "$dev2" /mnt
	verify_files "$sums" "journal: a file synced before the remote stopped differs"
	verify_files "$sums-b" "journal: a file synced with the remote down (only in the log) differs"
	must "umount /mnt" umount /mnt
	detach "$dev2"
	step "journal: stop wbd (SIGTERM: written back, the log left empty), then the remote"
	stop_wbd
	kill -TERM "$BACK_PID"
	wait "$BACK_PID" || fail "the remote wbd exited with status $? after SIGTERM"
	BACK_PID=
	say "OK journal"
}

run_mode netlink /dev/nbd0 /dev/nbd1
run_mode ioctl /dev/nbd2 /dev/nbd3
run_journal /dev/nbd5 /dev/nbd6
run_tls /dev/nbd4
step "done"
say PASS
poweroff_now
