#!/usr/bin/env bash
# The assets of a GitHub release, in one folder: every file artifacthub-pkg.yml, README.md, docs/ and
# the chart's README link as https://github.com/c5c3/memcached-operator/releases/download/v<version>/<asset>.
# `make release` runs this; uploading the folder's files to the release v<version> is the one manual step
# (docs/development/release.md).
#
#   deploy/release.sh OUTDIR     build the assets into OUTDIR (emptied first)
#   deploy/release.sh --list     the asset names, one a line, nothing built (e2e-tests/testbed/check_release_links.py
#                                checks every release link of the docs names one of them)
#
# Assets (ASSETS below, the one list): policy.wasm, annotated-policy.wasm (what `make push` pushes: with
# metadata.yml and the policy README embedded), memcached-operator-<chart version>.tgz (`helm package`, as
# `make push-chart` pushes it), crd.yaml (deploy/crd.yaml), cosign.pub (the public key the policy and the
# chart are signed with) and SHA256SUMS (`sha256sum` of all the others).
#
# Environment:
#   POLICY           policy.wasm (default: ./policy.wasm)
#   ANNOTATED        annotated-policy.wasm (default: ./annotated-policy.wasm)
#   HELM             helm (default: helm on PATH; `make release` passes target/tools/helm)
#   COSIGN           cosign v2 (default: cosign on PATH; `make release` passes target/tools/cosign)
#   COSIGN_KEY       the release's private key (file or KMS URI): cosign.pub is its public half
#                    (`cosign public-key --key`; the key's password in COSIGN_PASSWORD)
#   COSIGN_PUB       or the public key itself, a PEM file; without either nothing is built
#
# One release, one tag: metadata.yml's io.kubewarden.policy.version, the workspace version of Cargo.toml
# and the chart's version must agree (the tag is v<that version>).
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "release: $*" >&2; exit 1; }

CHART=deploy/helm/memcached-operator
chart_version=$(sed -n 's/^version: *//p' "$CHART/Chart.yaml" | head -1)
policy_version=$(sed -n 's/^ *io.kubewarden.policy.version: *//p' metadata.yml)
crate_version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
[ -n "$chart_version" ] || die "$CHART/Chart.yaml has no version"

ASSETS=(policy.wasm annotated-policy.wasm "memcached-operator-$chart_version.tgz" crd.yaml cosign.pub SHA256SUMS)

if [ "${1:-}" = --list ]; then
  printf '%s\n' "${ASSETS[@]}"
  exit 0
fi
[ $# -eq 1 ] || die "usage: $0 OUTDIR | --list"
out=$1

[ "$policy_version" = "$chart_version" ] && [ "$crate_version" = "$chart_version" ] \
  || die "versions disagree: metadata.yml $policy_version, Cargo.toml $crate_version, Chart.yaml $chart_version (one release, one tag)"
POLICY=${POLICY:-policy.wasm}
ANNOTATED=${ANNOTATED:-annotated-policy.wasm}
HELM=${HELM:-helm}
COSIGN=${COSIGN:-cosign}
[ -f "$POLICY" ] || die "$POLICY: no such file (make policy.wasm)"
[ -f "$ANNOTATED" ] || die "$ANNOTATED: no such file (make annotated-policy.wasm)"
command -v "$HELM" >/dev/null || die "helm not found ($HELM): make target/tools/helm"
if [ -n "${COSIGN_PUB:-}" ]; then
  [ -z "${COSIGN_KEY:-}" ] || die "COSIGN_PUB=$COSIGN_PUB and COSIGN_KEY=$COSIGN_KEY: give one"
  grep -q -- '-----BEGIN PUBLIC KEY-----' "$COSIGN_PUB" 2>/dev/null || die "COSIGN_PUB=$COSIGN_PUB: not a PEM public key"
elif [ -n "${COSIGN_KEY:-}" ]; then
  command -v "$COSIGN" >/dev/null || die "cosign not found ($COSIGN): make target/tools/cosign"
else
  die "no public key to publish: set COSIGN_KEY=<the release key, file or KMS URI> (and COSIGN_PASSWORD) \
or COSIGN_PUB=<cosign.pub>; the docs tell users to verify with the release's cosign.pub"
fi

rm -rf "$out"
mkdir -p "$out"
cp "$POLICY" "$out/policy.wasm"
cp "$ANNOTATED" "$out/annotated-policy.wasm"
cp deploy/crd.yaml "$out/crd.yaml"
# helm warns about every symlink it follows: that is how the chart shares deploy/'s files.
"$HELM" package "$CHART" --destination "$out" 2> >(grep -v 'found symbolic link' >&2) >&2 \
  || die "helm package $CHART failed"
if [ -n "${COSIGN_PUB:-}" ]; then
  cp "$COSIGN_PUB" "$out/cosign.pub"
else
  "$COSIGN" public-key --key "$COSIGN_KEY" --outfile "$out/cosign.pub" >&2 \
    || die "cannot read the public key of $COSIGN_KEY (wrong COSIGN_PASSWORD?)"
fi
(cd "$out" && sha256sum -- $(printf '%s\n' "${ASSETS[@]}" | grep -vx SHA256SUMS) > SHA256SUMS)

# Exactly the listed assets, nothing else.
diff <(printf '%s\n' "${ASSETS[@]}" | sort) <(ls -1 "$out" | sort) >&2 \
  || die "$out does not hold exactly the assets listed in ASSETS"
echo "release: v$chart_version assets in $out; upload each to the GitHub release v$chart_version:" >&2
printf '  %s\n' "${ASSETS[@]}" >&2
