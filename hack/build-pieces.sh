#!/usr/bin/env bash
# Build the pieces of the local cluster one make target at a time, one progress line each:
#   [7/13] kubelet (Go, about 3 min cold) ... 2m41s (9m12s since the start)
# Each piece's compiler output goes to LOGDIR/<n>-<target>.log, shown in full only when it fails.
# STARTED (seconds since the epoch) is when the whole command began, for the elapsed time.
#
# usage: hack/build-pieces.sh LOGDIR 'target|what it is (about N min cold)' ...
set -euo pipefail
logs=$1
shift
mkdir -p "$logs"
started=${STARTED:-$(date +%s)}
minutes() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
total=$#
n=0
for piece in "$@"; do
	n=$((n + 1))
	target=${piece%%|*} what=${piece#*|}
	log="$logs/$n-$(basename "$target" | tr -c 'A-Za-z0-9._\n-' '_').log"
	printf '[%d/%d] %s ... ' "$n" "$total" "$what"
	began=$(date +%s)
	if ! "${MAKE:-make}" --no-print-directory "$target" >"$log" 2>&1; then
		echo "FAILED after $(minutes $(($(date +%s) - began))); its output ($log):"
		cat "$log"
		exit 1
	fi
	now=$(date +%s)
	if grep -q "is up to date\|Nothing to be done" "$log" && [ "$(wc -l <"$log")" -le 2 ]; then
		echo "up to date"
	else
		echo "$(minutes $((now - began))) ($(minutes $((now - started))) since the start)"
	fi
done
