# SPDX-License-Identifier: GPL-2.0-or-later
# lib-service.sh - helpers for the service tests: wbd as systemd runs it.
# Sourced, not run; builds on ../integration/lib.sh and ../ctl/lib-ctl.sh
# (read them first).
#
#   start_notify_listener      a NOTIFY_SOCKET ($NOTIFY) whose messages go
#                              to $NOTES, one field a line (notify-listen.py)
#   wait_note REGEX [SECS [AFTER]]
#                              wait until a line of $NOTES after line AFTER
#                              (default 0) matches REGEX; sets NOTE_LINE
#   notes_lines                the number of lines in $NOTES now
#   wait_log REGEX SECS        wait until a line of $LOG matches the
#                              extended REGEX; false if none within SECS

: "${SRCDIR:?SRCDIR must name tests/service}"
SERVICE_DIR=$SRCDIR
SRCDIR=$SERVICE_DIR/../ctl
source "$SRCDIR/lib-ctl.sh"
SRCDIR=$SERVICE_DIR

NOTIFY=$T/notify.sock
NOTES=$T/notify.log

start_notify_listener() {
	local i
	: >"$NOTES"
	python3 "$SERVICE_DIR/notify-listen.py" "$NOTIFY" "$NOTES" \
		2>>"$T/notify-listen.err" &
	_PIDS+=("$!")
	for ((i = 0; i < 100; i++)); do
		[[ -S $NOTIFY ]] && return 0
		sleep 0.1
	done
	fail "the notify listener did not bind $NOTIFY within 10 s"
}

notes_lines() {
	wc -l <"$NOTES"
}

NOTE_LINE=
wait_note() {
	local re=$1 secs=${2:-30} after=${3:-0} i hit
	for ((i = 0; i < secs * 10; i++)); do
		hit=$(awk -v a="$after" -v re="$re" \
			'NR > a && $0 ~ re { print NR; exit }' "$NOTES")
		if [[ -n $hit ]]; then
			NOTE_LINE=$hit
			return 0
		fi
		sleep 0.1
	done
	printf -- '--- %s ---\n' "$NOTES" >&2
	cat "$NOTES" >&2
	fail "no notification matching /$re/ after line $after within $secs s"
}

wait_log() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		grep -Eq -- "$1" "$LOG" && return 0
		sleep 0.1
	done
	return 1
}
