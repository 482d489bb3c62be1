#!/usr/bin/env bash
# `make test` after its prerequisites: one build of every test binary, then four lanes at once: the
# real node's suite (it waits on a kubelet and containerd most of its time); lint (rustfmt, clippy,
# the Makefile's and the docs' checks, go vet); the controller suite (its own local control plane);
# and the other test binaries (unit and integration tests, the policy through wasmtime, the other
# suites on a local control plane), doc tests, then the checks of the packaging. Each suite's output
# goes to $LOGS/<suite>.log and is shown in full when it fails; at the end, a table of each phase's
# time (docs/numbers.md keeps it) and one closing line: "test phases: N passed, N failed".
#
# usage: hack/test.sh LOGS FEATURES    (CARGO, MAKE and CARGO_INCREMENTAL from the environment)
set -uo pipefail
logs=$1 features=$2
cargo=${CARGO:-cargo} make=${MAKE:-make}
rm -rf "$logs" && mkdir -p "$logs"
results="$logs/results.tsv"
: >"$results"
started=$(date +%s)

# Run phase NAME: the command after it, output in $logs/NAME.log; record its time and outcome.
phase() {
	local name=$1 began status
	shift
	began=$(date +%s)
	"$@" >"$logs/$name.log" 2>&1
	status=$?
	printf '%s\t%s\t%s\n' "$name" $(($(date +%s) - began)) "$([ $status -eq 0 ] && echo ok || echo FAILED)" >>"$results"
	if [ $status -eq 0 ]; then
		echo "ok     $name ($(($(date +%s) - began)) s)"
	else
		echo "FAILED $name ($(($(date +%s) - began)) s): its output, also in $logs/$name.log:"
		cat "$logs/$name.log"
	fi
	return $status
}

# A test binary run as cargo runs it: from its package's directory.
run_test() {
	(cd "$1" && exec "$2")
}

# Build every test binary of the workspace (and the programs the suites start) once; list them in
# $artifacts: package directory, target name, executable.
compile() {
	"$cargo" test --locked --workspace --features "$features" --no-run --message-format=json-render-diagnostics \
		| jq -r 'select(.reason == "compiler-artifact" and .profile.test and .executable != null)
			| [(.manifest_path | rtrimstr("/Cargo.toml")), .target.name, .executable] | @tsv' >"$artifacts"
}

artifacts="$logs/artifacts.tsv"
if phase compile compile; then
	# The real node's suite in its own lane (its absence is a failure, not a skip); the other test
	# binaries in theirs, in the order cargo built them.
	(
		grep -qP '\tnode\t' "$artifacts" || phase suite-node false
		grep -P '\tnode\t' "$artifacts" | while IFS=$'\t' read -r dir name exe; do
			phase "suite-$name" run_test "$dir" "$exe" || true
		done
	) &
	node_lane=$!
	# Lint in a lane of its own: its compilers run while the suites wait on their clusters.
	(phase lint "$make" --no-print-directory lint || true) &
	lint_lane=$!
	# The controller suite (its own control plane and network namespace) in a lane of its own
	# too: it waits on its API server most of its time, beside the differential suite's CPU.
	(
		grep -qP '^[^\t]*/e2e-tests\tcontroller\t' "$artifacts" || phase e2e-tests-controller false
		grep -P '^[^\t]*/e2e-tests\tcontroller\t' "$artifacts" | while IFS=$'\t' read -r dir name exe; do
			phase "$(basename "$dir")-$name" run_test "$dir" "$exe" || true
		done
	) &
	controller_lane=$!
	grep -vP '\tnode\t' "$artifacts" | grep -vP '^[^\t]*/e2e-tests\tcontroller\t' |
		while IFS=$'\t' read -r dir name exe; do
			phase "$(basename "$dir")-$name" run_test "$dir" "$exe" || true
		done
	phase doc-tests "$cargo" test --locked --workspace --features "$features" --doc || true
	phase metadata python3 e2e-tests/testbed/check_metadata.py || true
	phase release-links python3 e2e-tests/testbed/check_release_links.py || true
	phase bats bats e2e-tests/testbed/prereqs.bats e2e-tests/testbed/toolchain.bats e2e-tests/testbed/e2e.bats e2e-tests/testbed/signing.bats \
		e2e-tests/testbed/image.bats || true
	phase helm-and-promtool "$make" --no-print-directory helm-test prometheus-test || true
	wait "$node_lane" "$lint_lane" "$controller_lane"
fi

echo
echo "make test, phase by phase (seconds; the node suite, lint and the controller suite ran beside the others):"
sort -t$'\t' -k2 -rn "$results" | awk -F'\t' '{ printf "  %-40s %6d  %s\n", $1, $2, $3 }'
echo "  $(printf '%-40s' 'all, wall clock') $(printf '%6d' $(($(date +%s) - started)))"
passed=$(grep -c $'\tok$' "$results")
failed=$(grep -c $'\tFAILED$' "$results")
echo "test phases: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
