#!/usr/bin/env bash
# Publish the Helm chart as an OCI artifact and sign what was pushed with cosign (v2, key-based), as
# deploy/push-policy.sh does for the policy: `make push-chart` runs this.
#
#   deploy/helm/push-chart.sh CHART_DIR oci://HOST[:PORT]/REPOSITORY
#
# pushes oci://HOST/REPOSITORY/<chart name>:<chart version> (Chart.yaml's name and version; e.g.
# oci://ghcr.io/c5c3/charts/memcached-operator:0.5.0).
#
# Environment:
#   HELM             helm (default: helm on PATH; `make push-chart` passes target/tools/helm)
#   COSIGN           cosign v2 (default: cosign on PATH; `make push-chart` passes target/tools/cosign)
#   COSIGN_KEY       the private key: a file written by `cosign generate-key-pair`, or a KMS URI
#                    cosign understands (awskms://, gcpkms://, azurekms://, hashivault://)
#   COSIGN_PASSWORD  the key's password, read by cosign itself
#   SIGN=no          push unsigned, on purpose; without COSIGN_KEY and without SIGN=no nothing is pushed
#   PLAIN_HTTP=yes   the registry speaks plain HTTP (a local one): helm push --plain-http, cosign
#                    --allow-http-registry --allow-insecure-registry
#
# `helm package` follows the chart's symlinks into deploy/ (the CRD, RBAC, alerts, dashboard), so the
# artifact carries the files themselves. The signature is made over the manifest digest helm push
# reports (never over the tag, which anyone with push rights can move) and stays offline: no Rekor
# upload (--tlog-upload=false), no Fulcio, no TUF; it is stored next to the chart as cosign's
# `sha256-<digest>.sig` tag. Check it with
#   cosign verify --key cosign.pub --insecure-ignore-tlog=true HOST/REPOSITORY/<chart>@sha256:...
# Registry credentials: helm's (`helm registry login HOST`) for the push, ~/.docker/config.json
# (`docker login`, `cosign login`) for the signature.
#
# Output: the immutable reference (oci://HOST/REPOSITORY/<chart>@sha256:...) on stdout, last line.
set -euo pipefail

die() { echo "push-chart: $*" >&2; exit 1; }

[ $# -eq 2 ] || die "usage: $0 CHART_DIR oci://HOST/REPOSITORY"
chart=$1 repository=$2
[[ $repository == oci://* ]] || die "$repository: not an oci:// reference"
[ -f "$chart/Chart.yaml" ] || die "$chart: no Chart.yaml"
HELM=${HELM:-helm}
COSIGN=${COSIGN:-cosign}
sign=${SIGN:-yes}
plain=${PLAIN_HTTP:-no}

case $sign in
  no)
    [ -z "${COSIGN_KEY:-}" ] || die "SIGN=no and COSIGN_KEY=$COSIGN_KEY: choose one"
    echo "push-chart: SIGN=no: pushing the chart UNSIGNED; whoever verifies signatures will refuse it" >&2
    ;;
  yes)
    [ -n "${COSIGN_KEY:-}" ] || die "no signing key: set COSIGN_KEY=<cosign.key or KMS URI> (and COSIGN_PASSWORD), \
or SIGN=no to push an unsigned chart on purpose"
    [[ $COSIGN_KEY == *://* ]] || [ -r "$COSIGN_KEY" ] || die "COSIGN_KEY=$COSIGN_KEY: no such readable file"
    command -v "$COSIGN" >/dev/null || die "cosign not found ($COSIGN): make target/tools/cosign"
    # Before anything is pushed: the key opens with this password (a wrong password after the push would
    # leave an unsigned chart under the tag).
    "$COSIGN" public-key --key "$COSIGN_KEY" >/dev/null || die "cannot open $COSIGN_KEY (wrong COSIGN_PASSWORD?)"
    ;;
  *) die "SIGN=$sign: yes or no" ;;
esac
case $plain in
  yes) helm_flags=(--plain-http) cosign_registry=(--allow-http-registry --allow-insecure-registry) ;;
  no) helm_flags=() cosign_registry=() ;;
  *) die "PLAIN_HTTP=$plain: yes or no" ;;
esac
command -v "$HELM" >/dev/null || die "helm not found ($HELM): make target/tools/helm"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# helm warns about every symlink it follows: that is how the chart shares deploy/'s files.
"$HELM" package "$chart" --destination "$work" 2> >(grep -v 'found symbolic link' >&2) >&2 \
  || die "helm package $chart failed"
packages=("$work"/*.tgz)
[ ${#packages[@]} -eq 1 ] && [ -f "${packages[0]}" ] || die "helm package wrote no chart archive"
package=${packages[0]}

pushed=$("$HELM" push "$package" "$repository" "${helm_flags[@]}" 2>&1) || die "helm push failed: $pushed"
echo "$pushed" >&2
reference=$(sed -n 's/^Pushed: *//p' <<<"$pushed" | tail -1)
digest=$(sed -n 's/^Digest: *//p' <<<"$pushed" | tail -1)
[ -n "$reference" ] || die "helm push reported no reference: $pushed"
[[ $digest == sha256:* ]] || die "helm push reported no digest: $pushed"
immutable="${reference%:*}@$digest"
echo "push-chart: pushed oci://$immutable" >&2

if [ "$sign" = yes ]; then
  "$COSIGN" sign --key "$COSIGN_KEY" --tlog-upload=false --yes "${cosign_registry[@]}" "$immutable" >&2 \
    || die "oci://$immutable was pushed but NOT signed: fix the cause and run again (the push is idempotent)"
  echo "push-chart: signed oci://$immutable with $COSIGN_KEY" >&2
fi
echo "oci://$immutable"
