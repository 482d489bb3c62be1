#!/usr/bin/env bash
# `make test` after its prerequisites, in four lanes at once: the real node's suite (two nodes at
# once), built first and started while the rest compiles (it waits on kubelets and containerd most of
# its time); lint (rustfmt, clippy, the Makefile's and the docs' checks, go vet), then the checks of
# the packaging (metadata, release links, the bats suites, helm and promtool); the controller suite,
# then the cluster suite (each its own local control plane); and the other test binaries (unit and
# integration tests, the policy through wasmtime, the other suites on a local control plane), then
# doc tests. Each suite's output goes to $LOGS/<suite>.log and is shown in full when it fails; at the
# end, a table of each phase's time (docs/numbers.md keeps it) and one closing line: "test phases: N
# passed, N failed".
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

# Build test binaries of the workspace (every one, or those `$@` selects: `--test node`) and the programs
# the suites start; list them in $1: package directory, target name, executable.
compile() {
	local out=$1
	shift
	"$cargo" test --locked --workspace --features "$features" --no-run --message-format=json-render-diagnostics "$@" \
		| jq -r 'select(.reason == "compiler-artifact" and .profile.test and .executable != null)
			| [(.manifest_path | rtrimstr("/Cargo.toml")), .target.name, .executable] | @tsv' >"$out"
}

# Run, one after the other, the test binaries of $1 whose line matches the pattern $2 (grep -P); their
# absence is a failure of phase $3, not a skip.
suites() {
	grep -qP "$2" "$1" || phase "$3" false
	grep -P "$2" "$1" | while IFS=$'\t' read -r dir name exe; do
		phase "$(basename "$dir")-$name" run_test "$dir" "$exe" || true
	done
}

node_artifacts="$logs/artifacts-node.tsv" artifacts="$logs/artifacts.tsv"
# The real node's suite (it waits on kubelets and containerd most of its time) starts as soon as it
# is built, while the rest compiles.
phase compile-node compile "$node_artifacts" --test node
(suites "$node_artifacts" '\tnode\t' e2e-tests-node) &
node_lane=$!
if phase compile compile "$artifacts"; then
	# Lint, then the packaging checks, in a lane of their own: its compilers run while the suites
	# wait on their clusters.
	(
		phase lint "$make" --no-print-directory lint || true
		phase metadata python3 e2e-tests/testbed/check_metadata.py || true
		phase release-links python3 e2e-tests/testbed/check_release_links.py || true
		phase bats bats e2e-tests/testbed/prereqs.bats e2e-tests/testbed/toolchain.bats e2e-tests/testbed/e2e.bats \
			e2e-tests/testbed/signing.bats e2e-tests/testbed/image.bats || true
		phase helm-and-promtool "$make" --no-print-directory helm-test prometheus-test || true
	) &
	lint_lane=$!
	# The controller suite, then the cluster suite (each its own control plane), in a lane of their
	# own: they wait on their API servers most of their time, beside the differential suite's CPU.
	(
		suites "$artifacts" '^[^\t]*/e2e-tests\tcontroller\t' e2e-tests-controller
		suites "$artifacts" '^[^\t]*/e2e-tests\tcluster\t' e2e-tests-cluster
	) &
	controller_lane=$!
	grep -vP '\tnode\t' "$artifacts" | grep -vP '^[^\t]*/e2e-tests\t(controller|cluster)\t' |
		while IFS=$'\t' read -r dir name exe; do
			phase "$(basename "$dir")-$name" run_test "$dir" "$exe" || true
		done
	phase doc-tests "$cargo" test --locked --workspace --features "$features" --doc || true
	wait "$lint_lane" "$controller_lane"
fi
wait "$node_lane"

echo
echo "make test, phase by phase (seconds; four lanes at once: the node suite; lint and the packaging checks; the controller and cluster suites; the rest):"
sort -t$'\t' -k2 -rn "$results" | awk -F'\t' '{ printf "  %-40s %6d  %s\n", $1, $2, $3 }'
echo "  $(printf '%-40s' 'all, wall clock') $(printf '%6d' $(($(date +%s) - started)))"
passed=$(grep -c $'\tok$' "$results")
failed=$(grep -c $'\tFAILED$' "$results")
echo "test phases: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
