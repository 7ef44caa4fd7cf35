#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# nbdcopy-sparse.sh - nbdcopy of a sparse export: wbd against nbdkit's file
# plugin on the same file, in one run.
#
#   bash bench/nbdcopy-sparse.sh
#
# Makes a sparse file of BENCH_COPY_SIZE (default 4G) under BENCH_TMPDIR
# (default /var/tmp) whose data is BENCH_COPY_PCT percent (default 10) of
# it, in 1 MiB extents spread evenly (random bytes), the rest holes.  Then,
# BENCH_ROUNDS times (default 3), in an order rotated each round:
#
#   wbd         a fresh wbd (release build, cache.size 1G: the data fits)
#               exporting the file, its cache empty: `nbdcopy URI null:`
#               timed (nbdcopy asks for base:allocation and skips holes);
#   wbd-warm    the same wbd copied again, the data now in its cache;
#   nbdkit-file nbdkit's file plugin on the same file, `nbdcopy URI null:`.
#
# Both servers read the file through the host's page cache, which holds it
# after the first pass (dropping it needs root and a writable
# /proc/sys/vm/drop_caches; the script does when it can and says so).
# After the timed copies, one copy from each server to a file checks the
# bytes (cmp) and that the copy stayed sparse (allocated blocks).
#
# Prints a table of the median times and the ratio wbd / nbdkit-file, and
# writes it with the logs to bench/results/STAMP-nbdcopy-sparse/report.md.
#
# Environment: BENCH_COPY_SIZE, BENCH_COPY_PCT, BENCH_ROUNDS, BENCH_TMPDIR,
# BENCH_KEEP=1, WBD (a wbd binary instead of building build-bench/),
# WBD_SKIP_DEPS=1 - as bench/run.sh, whose functions are sourced.
set -euo pipefail

case ${1:-} in
-h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
"") ;;
*) echo "nbdcopy-sparse: unknown argument $1 (see --help)" >&2; exit 2 ;;
esac

# shellcheck source=bench/run.sh
source "$(dirname "${BASH_SOURCE[0]}")/run.sh"

COPY_SIZE=${BENCH_COPY_SIZE:-4G}
COPY_PCT=${BENCH_COPY_PCT:-10}
RESULTS=$REPO/bench/results/$STAMP-nbdcopy-sparse
[[ $COPY_PCT =~ ^[0-9]+$ ]] && ((COPY_PCT > 0 && COPY_PCT <= 100)) ||
    die "BENCH_COPY_PCT must be 1..100"

install_deps
build_wbd
build_wbctl
T=$(mktemp -d "${BENCH_TMPDIR:-/var/tmp}/wbd-copy.XXXXXX")
((${#T} < 80)) || die "temporary directory $T is too long for Unix socket paths"
IMG=$T/sparse.img
size_bytes=$(numfmt --from=iec "$COPY_SIZE")
((size_bytes >= 16 << 20)) || die "BENCH_COPY_SIZE must be at least 16M"

# The file: one MiB of data every (100 / PCT) MiB.
say "making a $COPY_SIZE file with $COPY_PCT% data in $T"
"$PY" - "$IMG" "$size_bytes" "$COPY_PCT" <<'EOF'
import os, sys
path, size, pct = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
mib = 1 << 20
n = size // mib
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.ftruncate(fd, size)
step = 100 / pct
k = 0
while int(k * step) < n:
    os.pwrite(fd, os.urandom(mib), int(k * step) * mib)
    k += 1
os.fsync(fd)
os.close(fd)
print(k, "MiB of data", file=sys.stderr)
EOF
DATA_KIB=$(du -k "$IMG" | cut -f1)

drop_caches() {
	if [[ -w /proc/sys/vm/drop_caches ]] && sync && echo 1 >/proc/sys/vm/drop_caches 2>/dev/null; then
		DROPPED=yes
	fi
}
DROPPED=no

# up NAME: start the server NAME on $T/NAME.sock; sets SRV_PID, URI.
up() {
	local sock=$T/$1.sock
	rm -f "$sock"
	case $1 in
	wbd)
		cat >"$T/wbd.conf" <<-EOF
		# written by bench/nbdcopy-sparse.sh
		listen = { unix = [ "$sock" ]; };
		control = { socket = "$T/ctl.sock"; };
		cache = { size = "1G"; };
		exports = ( { name = "disk0"; backing = "$IMG"; } );
		EOF
		spawn "$T/wbd.log" "$WBD" -f -c "$T/wbd.conf"
		URI="nbd+unix:///disk0?socket=$sock"
		;;
	nbdkit-file)
		spawn "$T/nbdkit.log" nbdkit -f -U "$sock" file file="$IMG"
		URI="nbd+unix:///?socket=$sock"
		;;
	esac
	wait_ready "$SRV_PID" "$URI" || die "$1 did not start (see $SRV_LOG)"
	[[ $1 != wbd ]] || wbd_settled "$T/ctl.sock"
}

# timed URI: seconds taken by `nbdcopy URI null:`.
timed() {
	local t0 t1
	t0=$(date +%s.%N)
	nbdcopy "$1" null: || die "nbdcopy from $1 failed"
	t1=$(date +%s.%N)
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }'
}

declare -A TIME    # [server,round]
SERVERS=(wbd nbdkit-file)
for ((r = 1; r <= ROUNDS; r++)); do
	order=("${SERVERS[@]:$(((r - 1) % 2))}" "${SERVERS[@]:0:$(((r - 1) % 2))}")
	for s in "${order[@]}"; do
		drop_caches
		up "$s"
		TIME[$s,$r]=$(timed "$URI")
		say "round $r: $s ${TIME[$s,$r]} s"
		if [[ $s == wbd ]]; then
			TIME[wbd-warm,$r]=$(timed "$URI")
			say "round $r: wbd-warm ${TIME[wbd-warm,$r]} s"
		fi
		stop_pid "$SRV_PID" 60 || die "$s exited with status $? on SIGTERM"
	done
done

# The check: bytes and sparseness of one copy from each server.
CHECK=()
for s in "${SERVERS[@]}"; do
	up "$s"
	rm -f "$T/out.img"
	truncate -s "$size_bytes" "$T/out.img"
	nbdcopy "$URI" "$T/out.img" || die "nbdcopy from $s to a file failed"
	stop_pid "$SRV_PID" 60 || die "$s exited with status $? on SIGTERM"
	cmp "$IMG" "$T/out.img" || die "the copy from $s differs from the file"
	CHECK+=("$s: bytes equal; copy allocates $(du -k "$T/out.img" | cut -f1) KiB (the file $DATA_KIB KiB)")
done
rm -f "$T/out.img"

med() {
	local s=$1 r vals=()
	for ((r = 1; r <= ROUNDS; r++)); do vals+=("${TIME[$s,$r]}"); done
	printf '%s\n' "${vals[@]}" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
rounds() {
	local s=$1 r out=
	for ((r = 1; r <= ROUNDS; r++)); do out+="${out:+, }${TIME[$s,$r]}"; done
	echo "$out"
}

mkdir -p "$RESULTS"
cp "$T"/*.log "$T"/*.conf "$RESULTS"/ 2>/dev/null || true
M_WBD=$(med wbd) M_WARM=$(med wbd-warm) M_KIT=$(med nbdkit-file)
{
	echo "# nbdcopy of a sparse export"
	echo
	echo "\`bash bench/nbdcopy-sparse.sh\`, $(date -u '+%Y-%m-%d %H:%M UTC'), wbd $(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown);"
	echo "$(nproc) CPUs; a $COPY_SIZE file with $COPY_PCT% data ($DATA_KIB KiB allocated) on $(df -T "$T" | awk 'NR == 2 { print $2 }');"
	echo "\`nbdcopy URI null:\`, median of $ROUNDS rounds; host page cache dropped before each server: $DROPPED."
	echo
	echo "| server | median (s) | rounds (s) | / nbdkit-file |"
	echo "|---|---:|---:|---:|"
	for s in wbd wbd-warm nbdkit-file; do
		printf '| %s | %s | %s | %s× |\n' "$s" "$(med "$s")" "$(rounds "$s")" \
		    "$(awk -v a="$(med "$s")" -v b="$M_KIT" 'BEGIN { printf "%.2f", a / b }')"
	done
	echo
	printf -- '- %s\n' "${CHECK[@]}"
} >"$RESULTS/report.md"
cat "$RESULTS/report.md"
say "report in $RESULTS/report.md (wbd cold $M_WBD s, warm $M_WARM s, nbdkit file $M_KIT s)"
