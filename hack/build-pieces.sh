#!/usr/bin/env bash
# Build the pieces of the local cluster one make target at a time, one progress line each:
#   [7/13] kubelet (Go, about 3 min cold) ... 2m41s (9m12s since the start)
# The piece given with --beside builds in the background from the start, beside the others (on 2
# cores its compiler's serial stretches and theirs fill each other's idle core), and its line
# comes last, once it is done.
# Each piece's compiler output goes to LOGDIR/<n>-<target>.log, shown in full only when it fails.
# STARTED (seconds since the epoch) is when the whole command began, for the elapsed time.
#
# usage: hack/build-pieces.sh LOGDIR [--beside 'target|what'] 'target|what it is (about N min cold)' ...
set -euo pipefail
logs=$1
shift
beside=
if [ "${1:-}" = --beside ]; then
	beside=$2
	shift 2
fi
mkdir -p "$logs"
started=${STARTED:-$(date +%s)}
minutes() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
total=$#
[ -z "$beside" ] || total=$((total + 1))
# The log of piece number $1, target $2.
log_of() { echo "$logs/$1-$(basename "$2" | tr -c 'A-Za-z0-9._\n-' '_').log"; }
# The outcome of piece $1 (target $2, log $3), begun at $4, whose make exited with $5 at $6.
outcome() {
	local now=$6
	if [ "$5" -ne 0 ]; then
		echo "FAILED after $(minutes $((now - $4))); its output ($3):"
		cat "$3"
		return 1
	fi
	if grep -q "is up to date\|Nothing to be done" "$3" && [ "$(wc -l <"$3")" -le 2 ]; then
		echo "up to date"
	else
		echo "$(minutes $((now - $4))) ($(minutes $((now - started))) since the start)"
	fi
}

if [ -n "$beside" ]; then
	beside_target=${beside%%|*} beside_log=$(log_of "$total" "${beside%%|*}") beside_began=$(date +%s)
	# Its own process group (set -m), stopped whole if another piece fails.
	set -m
	(
		status=0
		"${MAKE:-make}" --no-print-directory "$beside_target" >"$beside_log" 2>&1 || status=$?
		echo "$status $(date +%s)" >"$beside_log.end"
	) &
	beside_pid=$!
	set +m
	trap 'kill -- -$beside_pid 2>/dev/null || true' EXIT
fi
n=0
for piece in "$@"; do
	n=$((n + 1))
	target=${piece%%|*} what=${piece#*|}
	log=$(log_of "$n" "$target")
	printf '[%d/%d] %s ... ' "$n" "$total" "$what"
	began=$(date +%s) status=0
	"${MAKE:-make}" --no-print-directory "$target" >"$log" 2>&1 || status=$?
	outcome "$n" "$target" "$log" "$began" "$status" "$(date +%s)" || exit 1
done
if [ -n "$beside" ]; then
	printf '[%d/%d] %s, built beside the others ... ' "$total" "$total" "${beside#*|}"
	wait "$beside_pid" || true
	trap - EXIT
	read -r status ended <"$beside_log.end" || { status=1 ended=$(date +%s); }
	outcome "$total" "$beside_target" "$beside_log" "$beside_began" "$status" "$ended" || exit 1
fi
