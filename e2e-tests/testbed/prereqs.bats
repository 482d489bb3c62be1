#!/usr/bin/env bats
# `hack/prereqs.sh`, the first step of `make demo` and `make test`: what the build cannot install
# itself, each missing piece named in one line that says what to install. Stand-ins first on PATH
# play Go, kwctl and policy-server at the versions a user may have, cargo, make and root
# (`id -u`) as present, and `df` with the free space a user may have, so the answers do not
# depend on this machine.

bats_require_minimum_version 1.5.0

ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
NEED_GO="$(cd "$ROOT" && sed -n 's/^go \([0-9.]*\)$/\1/p' $(git ls-files '*go.mod' 2>/dev/null || find . -name go.mod -not -path './target/*') | sort -V | tail -1)"

setup() {
  BIN="$BATS_TEST_TMPDIR/bin"
  CHARTS="$BATS_TEST_TMPDIR/charts"
  mkdir -p "$BIN"
  for chart in kubewarden-crds kubewarden-controller kubewarden-defaults; do
    mkdir -p "$CHARTS/$chart" && echo "name: $chart" >"$CHARTS/$chart/Chart.yaml"
  done
  # go answers `env GOVERSION` with go$GO_VERSION; kwctl and policy-server `--version` with theirs.
  printf '#!/bin/sh\necho "go$GO_VERSION"\n' >"$BIN/go"
  printf '#!/bin/sh\necho 0\n' >"$BIN/id"
  printf '#!/bin/sh\n' >"$BIN/cargo"
  printf '#!/bin/sh\n' >"$BIN/make"
  # df -Pk <dir> answers with $FREE_KIB available.
  printf '#!/bin/sh\necho "Filesystem 1024-blocks Used Available Capacity Mounted on"\necho "/dev/vda 264000000 1 $FREE_KIB 1%%%% /"\n' >"$BIN/df"
  engine kwctl 1.35.0
  engine policy-server 1.35.0
  chmod +x "$BIN/go" "$BIN/id" "$BIN/cargo" "$BIN/make" "$BIN/df"
  export GO_VERSION="$NEED_GO" FREE_KIB=$((30 * 1024 * 1024))
}

# A stand-in Kubewarden engine <name> answering --version with <version>.
engine() {
  printf '#!/bin/sh\necho "%s %s"\n' "$1" "$2" >"$BIN/$1"
  chmod +x "$BIN/$1"
}

prereqs() {
  PATH="$BIN:$PATH" run --separate-stderr bash "$ROOT/hack/prereqs.sh" "$BIN/kwctl" "$BIN/policy-server" "$CHARTS"
}

@test "everything present: silent, and the build goes on" {
  prereqs
  [ "$status" -eq 0 ]
  [ -z "$output" ] && [ -z "$stderr" ]
}

@test "a Go older than the modules need (Debian 12's) is named with the version needed" {
  export GO_VERSION=1.19.8
  prereqs
  [ "$status" -eq 1 ]
  [[ "${stderr_lines[0]}" == "prerequisite: Go $NEED_GO or newer is needed to build"*"is 1.19.8 (https://go.dev/dl)" ]]
  [ "${#stderr_lines[@]}" -eq 2 ]
}

@test "kwctl of another release: the one needed and the variable that picks another" {
  engine kwctl 1.36.0
  prereqs
  [ "$status" -eq 1 ]
  [ "${stderr_lines[0]}" = "prerequisite: $BIN/kwctl is kwctl 1.36.0; the suites and Kubewarden's charts need 1.35.0 (set KWCTL)" ]
}

@test "no policy-server: where it may come from" {
  rm "$BIN/policy-server"
  prereqs
  [ "$status" -eq 1 ]
  [[ "${stderr_lines[0]}" == "prerequisite: policy-server 1.35.0 is missing: put it on PATH, set POLICY_SERVER, or keep Kubewarden's build in ../shared/bin"* ]]
}

@test "a chart missing: named, with the variable that points elsewhere" {
  rm -r "$CHARTS/kubewarden-defaults"
  prereqs
  [ "$status" -eq 1 ]
  [[ "${stderr_lines[0]}" == "prerequisite: Kubewarden 1.35.0's charts kubewarden-defaults are missing from $CHARTS: set KUBEWARDEN_CHARTS"* ]]
}

@test "a disk nearly full: how much is free and how much the build needs" {
  export FREE_KIB=$((3 * 1024 * 1024))
  prereqs
  [ "$status" -eq 1 ]
  [ "${stderr_lines[0]}" = "prerequisite: only 3 GiB free on the disk of $ROOT: make demo and make test need 8 GiB there (20 GiB on a first run with empty Go and cargo caches)" ]
}

@test "several missing: one line each, then how many" {
  export GO_VERSION=1.19.8
  engine kwctl 1.34.2
  rm -r "$CHARTS/kubewarden-crds"
  prereqs
  [ "$status" -eq 1 ]
  [ "${#stderr_lines[@]}" -eq 4 ]
  [ "${stderr_lines[3]}" = "3 prerequisite(s) missing: see above" ]
}
