#!/usr/bin/env bash
# Push the policy's OCI artifact with kwctl and sign what was pushed with cosign (v2, key-based):
# `make push` runs this.
#
#   deploy/push-policy.sh ARTIFACT registry://HOST[:PORT]/REPOSITORY:TAG
#
# Environment:
#   KWCTL            kwctl (default: kwctl on PATH)
#   COSIGN           cosign v2 (default: cosign on PATH; `make push` passes target/tools/cosign)
#   COSIGN_KEY       the private key: a file written by `cosign generate-key-pair`, or a KMS URI
#                    cosign understands (awskms://, gcpkms://, azurekms://, hashivault://)
#   COSIGN_PASSWORD  the key's password, read by cosign itself
#   SIGN=no          push unsigned, on purpose; without COSIGN_KEY and without SIGN=no nothing is pushed
#   SOURCES_PATH     kwctl's sources.yml (insecure_sources, source_authorities); cosign talks plain
#                    HTTP / skips TLS verification to a registry listed in its insecure_sources
#
# The signature is made over the manifest digest kwctl reports (never over the tag, which anyone with
# push rights can move) and stays offline: no Rekor upload (--tlog-upload=false), no Fulcio, no TUF;
# it is stored next to the artifact as cosign's `sha256-<digest>.sig` tag. Registry credentials come
# from ~/.docker/config.json for both tools.
#
# Output: the immutable reference (registry://HOST/REPOSITORY@sha256:...) on stdout, last line.
set -euo pipefail

die() { echo "push-policy: $*" >&2; exit 1; }

[ $# -eq 2 ] || die "usage: $0 ARTIFACT registry://HOST/REPOSITORY:TAG"
artifact=$1 reference=$2
[[ $reference == registry://* ]] || die "$reference: not a registry:// reference"
[ -f "$artifact" ] || die "$artifact: no such file"
KWCTL=${KWCTL:-kwctl}
COSIGN=${COSIGN:-cosign}
sign=${SIGN:-yes}

case $sign in
  no)
    [ -z "${COSIGN_KEY:-}" ] || die "SIGN=no and COSIGN_KEY=$COSIGN_KEY: choose one"
    echo "push-policy: SIGN=no: pushing $reference UNSIGNED; a cluster that verifies signatures will refuse it" >&2
    ;;
  yes)
    [ -n "${COSIGN_KEY:-}" ] || die "no signing key: set COSIGN_KEY=<cosign.key or KMS URI> (and COSIGN_PASSWORD), \
or SIGN=no to push an unsigned artifact on purpose"
    [[ $COSIGN_KEY == *://* ]] || [ -r "$COSIGN_KEY" ] || die "COSIGN_KEY=$COSIGN_KEY: no such readable file"
    command -v "$COSIGN" >/dev/null || die "cosign not found ($COSIGN): make target/tools/cosign"
    # Before anything is pushed: the key opens with this password (a wrong password after the push would
    # leave an unsigned artifact under the tag).
    "$COSIGN" public-key --key "$COSIGN_KEY" >/dev/null || die "cannot open $COSIGN_KEY (wrong COSIGN_PASSWORD?)"
    ;;
  *) die "SIGN=$sign: yes or no" ;;
esac
command -v "$KWCTL" >/dev/null || die "kwctl not found ($KWCTL)"
command -v jq >/dev/null || die "jq not found (make deps)"

sources=()
[ -z "${SOURCES_PATH:-}" ] || sources=(--sources-path "$SOURCES_PATH")
# kwctl logs to stderr (offline: a Sigstore warning) and answers on stdout.
pushed=$("$KWCTL" push "${sources[@]}" -o json "$artifact" "$reference")
immutable=$(jq -er .immutable_ref <<<"$pushed") || die "kwctl push answered: $pushed"
[[ $immutable == *@sha256:* ]] || die "kwctl push reported no digest: $immutable"
echo "push-policy: pushed $immutable" >&2

if [ "$sign" = yes ]; then
  cosign_flags=(--key "$COSIGN_KEY" --tlog-upload=false --yes)
  host=${immutable%%/*}
  listed=1
  if [ -n "${SOURCES_PATH:-}" ]; then
    # 0: the host is an insecure source, 1: it is not, 2: the file cannot be read.
    listed=0
    python3 - "$SOURCES_PATH" "$host" <<'PY' || listed=$?
import sys
try:
    import yaml
    with open(sys.argv[1]) as file:
        sources = yaml.safe_load(file) or {}
    insecure = sources.get("insecure_sources") or []
except Exception as error:
    print(f"push-policy: {sys.argv[1]}: {error}", file=sys.stderr)
    sys.exit(2)
sys.exit(0 if sys.argv[2] in insecure else 1)
PY
  fi
  case $listed in
    0) cosign_flags+=(--allow-http-registry --allow-insecure-registry) ;;
    1) ;;
    *) die "cannot read SOURCES_PATH=$SOURCES_PATH" ;;
  esac
  "$COSIGN" sign "${cosign_flags[@]}" "$immutable" >&2 \
    || die "$immutable was pushed but NOT signed: fix the cause and run again (the push is idempotent)"
  echo "push-policy: signed $immutable with $COSIGN_KEY" >&2
fi
echo "registry://$immutable"
