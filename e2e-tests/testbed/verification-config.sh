#!/usr/bin/env bash
# Kubewarden's verification config requiring the policy to be signed with a cosign public key: the YAML
# policy-server reads with --verification-path and `kwctl verify/pull --verification-config-path` reads,
# or (--configmap NAME NAMESPACE) the ConfigMap a PolicyServer names in spec.verificationConfig, which
# must hold it under the key `verification-config` (kubewarden-controller v1.35.0,
# internal/constants/constants.go PolicyServerVerificationConfigEntry; the controller mounts it as
# /verification/verification.yml and points KUBEWARDEN_VERIFICATION_CONFIG_PATH at it).
#
#   e2e-tests/testbed/verification-config.sh [--configmap NAME NAMESPACE] PUBLIC_KEY.pem [OWNER]
#
# Format (policy-fetcher's VerificationConfigV1; every signature of allOf must be present):
#   apiVersion: v1
#   allOf:
#     - kind: pubKey
#       owner: <free text, optional>
#       key: |
#         -----BEGIN PUBLIC KEY-----
#         ...
#
# Offline, policy-server 1.35 applies this only together with a Sigstore trust config
# (e2e-tests/testbed/sigstore-trust-config.sh): without one it cannot build its trust root and loads
# every policy unverified.
set -euo pipefail

configmap=()
if [ "${1:-}" = --configmap ]; then
  [ $# -ge 3 ] || { echo "usage: $0 [--configmap NAME NAMESPACE] PUBLIC_KEY.pem [OWNER]" >&2; exit 2; }
  configmap=("$2" "$3")
  shift 3
fi
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 [--configmap NAME NAMESPACE] PUBLIC_KEY.pem [OWNER]" >&2
  exit 2
fi
key=$1 owner=${2:-}
grep -q -- '-----BEGIN PUBLIC KEY-----' "$key" || { echo "$key: not a PEM public key (cosign.pub)" >&2; exit 1; }

config() {
  echo "apiVersion: v1"
  echo "allOf:"
  echo "  - kind: pubKey"
  # A JSON string is a YAML string: any owner text stays one scalar.
  [ -z "$owner" ] || echo "    owner: $(jq -n --arg owner "$owner" '$owner')"
  echo "    key: |"
  sed 's/^/      /' "$key"
}

if [ ${#configmap[@]} -eq 0 ]; then
  config
else
  cat <<YAML
apiVersion: v1
kind: ConfigMap
metadata:
  name: ${configmap[0]}
  namespace: ${configmap[1]}
data:
  verification-config: |
YAML
  config | sed 's/^/    /'
fi
