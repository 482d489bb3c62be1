#!/usr/bin/env bash
# What `make demo` and `make test` need but cannot install themselves, each checked up front with one line
# saying what to install. (The Rust toolchain and Debian's packages they install: `make toolchain`, `make deps`.)
# Usage: hack/prereqs.sh <kwctl> <policy-server> <Kubewarden charts directory>
set -uo pipefail
cd "$(dirname "$0")/.."
kwctl=$1 policy_server=$2 charts=$3
kubewarden=1.35.0
problems=0
problem() { echo "prerequisite: $*" >&2; problems=$((problems + 1)); }

# Go: the newest `go` directive of the project's modules (Debian 12's golang-go 1.19 cannot build them).
need_go=$(sed -n 's/^go \([0-9.]*\)$/\1/p' $(git ls-files '*go.mod' 2>/dev/null || find . -name go.mod -not -path './target/*') \
	| sort -V | tail -1)
if ! command -v go >/dev/null; then
	problem "Go $need_go or newer is missing: install it from https://go.dev/dl and put it on PATH"
else
	have_go=$(go env GOVERSION 2>/dev/null | sed 's/^go//')
	if [ "$(printf '%s\n%s\n' "$need_go" "$have_go" | sort -V | head -1)" != "$need_go" ]; then
		problem "Go $need_go or newer is needed to build Kubernetes, containerd and Kubewarden from their modules; $(command -v go) is ${have_go:-of no known version} (https://go.dev/dl)"
	fi
fi
command -v cargo >/dev/null || problem "cargo is missing: install rustup (https://rustup.rs); it reads rust-toolchain.toml"
command -v make >/dev/null || problem "make is missing: apt-get install make"

# Kubewarden's engines, at exactly the release the suites and the charts are built for.
engine() { # <name> <path> <env var>
	if [ -z "$2" ] || [ ! -x "$2" ]; then
		problem "$1 $kubewarden is missing: put it on PATH, set $3, or keep Kubewarden's build in ../shared/bin (https://github.com/kubewarden/kubewarden-controller/releases/tag/v$kubewarden)"
		return
	fi
	local version
	version=$("$2" --version 2>/dev/null | sed -n "1s/^$1 v\{0,1\}//p")
	[ "$version" = "$kubewarden" ] \
		|| problem "$2 is $1 ${version:-of no known version}; the suites and Kubewarden's charts need $kubewarden (set $3)"
}
engine kwctl "$kwctl" KWCTL
engine policy-server "$policy_server" POLICY_SERVER

# Kubewarden's Helm charts of the same release.
missing_charts=()
for chart in kubewarden-crds kubewarden-controller kubewarden-defaults; do
	[ -f "$charts/$chart/Chart.yaml" ] || missing_charts+=("$chart")
done
[ ${#missing_charts[@]} -eq 0 ] \
	|| problem "Kubewarden $kubewarden's charts ${missing_charts[*]} are missing from $charts: set KUBEWARDEN_CHARTS to a directory holding kubewarden-crds, kubewarden-controller and kubewarden-defaults (helm pull kubewarden/<chart> --version <chart version> --untar)"

# The real node and the suites' network namespaces: root, or unprivileged user namespaces.
if [ "$(id -u)" != 0 ] && ! unshare --user --map-root-user --net true 2>/dev/null; then
	problem "the local cluster needs root or unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)"
fi

# Disk: a fresh clone's target/ grows to about 6 GiB and the suites' pods write their memory files
# under the temp directory; memcached dies of SIGBUS when a memory file cannot grow (measured: `du -sh
# target` after `bash .ci/run`). Empty Go and cargo caches fill about 13 GiB more on the first run.
free_gib() { df -Pk "$1" 2>/dev/null | awk 'NR == 2 { print int($4 / 1048576) }'; }
for dir in "$PWD" "${TMPDIR:-/tmp}"; do
	free=$(free_gib "$dir")
	[ -z "$free" ] || [ "$free" -ge 8 ] \
		|| problem "only $free GiB free on the disk of $dir: make demo and make test need 8 GiB there (20 GiB on a first run with empty Go and cargo caches)"
done

[ "$problems" -eq 0 ] || { echo "$problems prerequisite(s) missing: see above" >&2; exit 1; }
