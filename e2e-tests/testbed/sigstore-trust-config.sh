#!/usr/bin/env bash
# A Sigstore ClientTrustConfig (JSON) for kwctl and policy-server 1.35 (`--sigstore-trust-config`), so
# that they verify key-based signatures without reaching Sigstore's TUF repository: kwctl verify fails
# outright without one when offline, and policy-server then skips verification altogether.
# Its trustedRoot is Sigstore's public-good trusted root as embedded in github.com/sigstore/sigstore,
# the version e2e-tests/testbed/tools/go.mod pins (go.sum checks it); key-based verification uses none of it,
# keyless verification would use its Fulcio CAs and Rekor key.
# With --configmap NAME NAMESPACE: the ConfigMap a PolicyServer names in spec.sigstoreTrustConfig,
# which must hold it under the key `sigstore-trust-config` (kubewarden-controller v1.35.0,
# internal/constants/constants.go PolicyServerSigstoreTrustConfigEntry).
#
#   e2e-tests/testbed/sigstore-trust-config.sh [--configmap NAME NAMESPACE]
set -euo pipefail

tools="$(cd "$(dirname "$0")" && pwd)/tools"
module=$(cd "$tools" && go mod download -json github.com/sigstore/sigstore | jq -er .Dir)
root="$module/pkg/tuf/repository/targets/trusted_root.json"
config=$(jq -c '{mediaType: "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json", trustedRoot: .}' "$root")

if [ "${1:-}" = --configmap ]; then
  [ $# -eq 3 ] || { echo "usage: $0 [--configmap NAME NAMESPACE]" >&2; exit 2; }
  cat <<YAML
apiVersion: v1
kind: ConfigMap
metadata:
  name: $2
  namespace: $3
data:
  sigstore-trust-config: '${config//"'"/"''"}'
YAML
else
  [ $# -eq 0 ] || { echo "usage: $0 [--configmap NAME NAMESPACE]" >&2; exit 2; }
  echo "$config"
fi
