#!/usr/bin/env bats
# The policy on Kubewarden's own engine, kwctl: every fixture with its exact answer, settings
# validation, the ClusterAdmissionPolicy manifests of deploy/ as kwctl runs them, the
# annotated artifact's metadata and the packaging kwctl scaffolds.
#
# kwctl comes from $KWCTL, PATH, or ../shared/bin (CI). Without it the suite skips, except
# where ../shared/bin exists: there a skip would prove nothing, so it fails.
# kwctl answers on stdout and logs on stderr (offline it always warns that Sigstore is out
# of reach): stdout is parsed, stderr only searched for a setting's name.

bats_require_minimum_version 1.5.0

ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
FIXTURES="$ROOT/e2e-tests/fixtures"
POLICY="$ROOT/annotated-policy.wasm"
MINIMAL="$FIXTURES/requests/seed-minimal-cr-after-defaulting-v1beta1.json"
INVALID="$FIXTURES/requests/seed-multiple-violations-v1beta1.json"
# The requests' namespace as a fresh cluster has it: no Pod Security label (a kwctl replay
# session of the policy's Namespace lookup, made below podSecurityLevel restricted).
UNLABELLED=(--allow-context-aware --replay-host-capabilities-interactions "$FIXTURES/sessions/namespace-unlabelled.yml")

setup_file() {
  if [ -z "${KWCTL:-}" ]; then
    KWCTL=$(command -v kwctl || true)
    [ -n "$KWCTL" ] || { [ ! -x "$ROOT/../shared/bin/kwctl" ] || KWCTL="$ROOT/../shared/bin/kwctl"; }
  fi
  export KWCTL
  # make rebuilds the artifact when policy.wasm, metadata.yml or the policy README changed.
  [ -z "$KWCTL" ] || make -C "$ROOT" -s annotated-policy.wasm >&2
}

setup() {
  if [ -z "$KWCTL" ]; then
    [ ! -d "$ROOT/../shared/bin" ] || fail "../shared/bin exists but has no kwctl: this suite must run, not skip"
    skip "kwctl not found: put it on PATH or set KWCTL (https://github.com/kubewarden/kwctl/releases)"
  fi
  command -v jq >/dev/null || fail "jq is needed (make deps)"
}

fail() { echo "$*" >&2; return 1; }

# Canonical JSON (sorted keys, compact) of stdin.
canonical() { jq -cS .; }

# The AdmissionResponse kwctl printed, whether bare or inside an AdmissionReview.
response() { jq -c '.response // .' <<<"$1"; }

# The expected rejection message: its own, or the errors aggregated like apierrors.NewInvalid.
expected_message() {
  jq -r --arg name "$2" '.message // ((.errors | if length == 1 then .[0] else "[" + join(", ") + "]" end) as $agg
    | "Memcached.memcached.c5c3.io \"\($name)\" is invalid: \($agg)")' "$1"
}

# The request's object with the response's base64 JSONPatch applied (RFC 6902 add/replace/remove).
patched_object() {
  python3 - "$1" "$2" <<'PY' | canonical
import base64, json, sys
request, response = json.load(open(sys.argv[1]))["request"], json.loads(sys.argv[2])
doc = request["object"]
for op in json.loads(base64.b64decode(response["patch"])):
    *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
    target = doc
    for p in parents:
        target = target[int(p)] if isinstance(target, list) else target[p]
    key = int(last) if isinstance(target, list) and last != "-" else last
    if op["op"] == "remove":
        del target[key]
    elif isinstance(target, list) and op["op"] == "add":
        target.append(op["value"]) if key == "-" else target.insert(key, op["value"])
    else:
        target[key] = op["value"]
print(json.dumps(doc))
PY
}

# Why the answer `got` to fixture `name` differs from its expectation; empty when it does not.
fixture_mismatch() {
  local name=$1 got=$2 request="$FIXTURES/requests/$1.json" expected="$FIXTURES/expected/$1.json"
  [ "$(jq .allowed <<<"$got")" = "$(jq .accepted "$expected")" ] || { echo "$name: allowed differs: $got"; return; }
  [ "$(jq -c '.warnings // []' <<<"$got")" = "$(jq -c .warnings "$expected")" ] || { echo "$name: warnings differ: $got"; return; }
  if [ "$(jq .accepted "$expected")" = false ]; then
    local object_name
    object_name=$(jq -r '.request.object.metadata.name' "$request")
    [ "$(jq -r .status.message <<<"$got")" = "$(expected_message "$expected" "$object_name")" ] || { echo "$name: message differs: $got"; return; }
    [ "$(jq .status.code <<<"$got")" = "$(jq '.code // 400' "$expected")" ] || echo "$name: code differs: $got"
  elif [ "$(jq 'has("object")' "$expected")" = true ]; then
    [ "$(jq -r .patchType <<<"$got")" = JSONPatch ] || { echo "$name: no JSONPatch: $got"; return; }
    [ "$(patched_object "$request" "$got")" = "$(jq .object "$expected" | canonical)" ] || echo "$name: mutation differs: $got"
  else
    [ "$(jq '.patch // null' <<<"$got")" = null ] || echo "$name: unexpected mutation: $got"
  fi
}

# A copy of deploy/<name>.yaml whose module is the local annotated artifact.
local_manifest() {
  sed "s#^\(  module:\).*#\1 file://$POLICY#" "$ROOT/deploy/$1.yaml" >"$BATS_TEST_TMPDIR/$1.yaml"
  echo "$BATS_TEST_TMPDIR/$1.yaml"
}

@test "kwctl run gives every fixture its exact answer" {
  local failures=() count=0
  for request in "$FIXTURES"/requests/*.json; do
    name=$(basename "$request" .json)
    count=$((count + 1))
    run --separate-stderr "$KWCTL" run --request-path "$request" "${UNLABELLED[@]}" \
      --settings-json "$(jq -c .settings "$FIXTURES/expected/$name.json")" "$POLICY"
    if [ "$status" -ne 0 ]; then
      failures+=("$name: kwctl exited $status")
      continue
    fi
    why=$(fixture_mismatch "$name" "$(response "$output")")
    [ -z "$why" ] || failures+=("$why")
  done
  [ "$count" -ge 40 ] || fail "only $count fixtures found"
  [ ${#failures[@]} -eq 0 ] || fail "$(printf '%s\n' "${failures[@]}")"
}

@test "valid settings are accepted" {
  run --separate-stderr "$KWCTL" run --request-path "$MINIMAL" \
    --settings-json '{"memoryOverhead": "64Mi", "mutate": false}' "$POLICY"
  [ "$status" -eq 0 ]
  [ "$(response "$output" | jq .allowed)" = true ]
}

@test "an invalid memoryOverhead is refused, naming the setting" {
  run --separate-stderr "$KWCTL" run --request-path "$MINIMAL" --settings-json '{"memoryOverhead": "a lot"}' "$POLICY"
  [ "$status" -ne 0 ]
  [[ "$stderr" == *'memoryOverhead "a lot"'* ]]
}

@test "an unknown setting is refused, naming it" {
  run --separate-stderr "$KWCTL" run --request-path "$MINIMAL" --settings-json '{"memoryOverhed": "64Mi"}' "$POLICY"
  [ "$status" -ne 0 ]
  [[ "$stderr" == *memoryOverhed* ]]
}

@test "a mutate setting of the wrong type is refused" {
  run --separate-stderr "$KWCTL" run --request-path "$MINIMAL" --settings-json '{"mutate": "yes"}' "$POLICY"
  [ "$status" -ne 0 ]
  [[ "$stderr" == *mutate* ]]
}

@test "an unknown podSecurityLevel is refused, naming the setting and the levels" {
  run --separate-stderr "$KWCTL" run --request-path "$MINIMAL" --settings-json '{"podSecurityLevel": "strict"}' "$POLICY"
  [ "$status" -ne 0 ]
  [[ "$stderr" == *'podSecurityLevel: unknown variant `strict`, expected one of `privileged`, `baseline`, `restricted`'* ]]
}

# Root in the container: baseline allows it, restricted does not.
ROOT_CR="$FIXTURES/requests/settings-pod-security-baseline-admits-root.json"

# kwctl run of ROOT_CR at podSecurityLevel baseline, with the extra arguments given.
run_baseline() {
  run --separate-stderr "$KWCTL" run --request-path "$ROOT_CR" --settings-json '{"podSecurityLevel": "baseline"}' "$@" "$POLICY"
  [ "$status" -eq 0 ] || fail "kwctl exited $status"
  output=$(response "$output")
}

@test "a namespace enforcing restricted tightens a baseline setting (kwctl replay of the Namespace lookup)" {
  run_baseline --allow-context-aware --replay-host-capabilities-interactions "$FIXTURES/sessions/namespace-restricted.yml"
  [ "$(jq .allowed <<<"$output")" = false ]
  [ "$(jq .status.code <<<"$output")" = 403 ]
  [[ "$(jq -r .status.message <<<"$output")" == 'Memcached.memcached.c5c3.io "my-cache" is forbidden: violates PodSecurity "restricted:latest" (enforced by namespace "default"): '*'runAsUser=0 (container "memcached" must not set runAsUser=0)' ]]
}

@test "a namespace enforcing less leaves the baseline setting in charge" {
  run_baseline --allow-context-aware --replay-host-capabilities-interactions "$FIXTURES/sessions/namespace-privileged.yml"
  [ "$(jq .allowed <<<"$output")" = true ]
}

@test "without access to Namespaces the policy judges restricted and says why" {
  run_baseline
  [ "$(jq .allowed <<<"$output")" = false ]
  [[ "$(jq -r '.warnings[-1]' <<<"$output")" == 'the Pod Security label of namespace "default" could not be read ('*'): judged at "restricted"' ]]
}

@test "at the default level the policy reads no Namespace" {
  # An empty replay session: any host call would find no recorded answer.
  printf -- '---\n[]\n' >"$BATS_TEST_TMPDIR/empty.yml"
  run --separate-stderr "$KWCTL" run --request-path "$ROOT_CR" --allow-context-aware \
    --replay-host-capabilities-interactions "$BATS_TEST_TMPDIR/empty.yml" "$POLICY"
  [ "$status" -eq 0 ]
  output=$(response "$output")
  [ "$(jq .status.code <<<"$output")" = 403 ]
  [ "$(jq '.warnings | length' <<<"$output")" = 1 ]
}

# kubectl scale of my-cache (namespace default) from 3 to 5, and a replay session in which the
# namespace enforces restricted and the stored Memcached, admitted at baseline, runs as root.
SCALE_UP="$FIXTURES/requests/scale-replicas-within-bounds.json"
SCALE_UP_SESSION="$FIXTURES/sessions/scale-up-root-in-restricted-namespace.yml"

# kwctl run of a request file at podSecurityLevel baseline, replaying the session given.
run_baseline_replaying() {
  run --separate-stderr "$KWCTL" run --request-path "$1" --settings-json '{"podSecurityLevel": "baseline"}' \
    --allow-context-aware --replay-host-capabilities-interactions "$2" "$POLICY"
  [ "$status" -eq 0 ] || fail "kwctl exited $status: $stderr"
  output=$(response "$output")
}

@test "a scale-up is refused as the same apply is where the namespace enforces more (kwctl replay of both reads)" {
  run_baseline_replaying "$SCALE_UP" "$SCALE_UP_SESSION"
  scale=$output
  [ "$(jq .allowed <<<"$scale")" = false ]
  [ "$(jq .status.code <<<"$scale")" = 403 ]
  [[ "$(jq -r .status.message <<<"$scale")" == 'Memcached.memcached.c5c3.io "my-cache" is forbidden: violates PodSecurity "restricted:latest" (enforced by namespace "default"): '*'runAsUser=0 (container "memcached" must not set runAsUser=0)'* ]]
  # kubectl apply of the same count: an UPDATE of the Memcached the session stores, its replicas 5.
  stored=$(python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))[1]["response"]["payload"])' "$SCALE_UP_SESSION")
  jq --argjson stored "$stored" '.request |= (.kind = {group: "memcached.c5c3.io", version: "v1beta1", kind: "Memcached"}
      | .requestKind = .kind | del(.subResource, .requestSubResource)
      | .oldObject = $stored | .object = ($stored | .spec.replicas = 5))' "$SCALE_UP" >"$BATS_TEST_TMPDIR/apply.json"
  run_baseline_replaying "$BATS_TEST_TMPDIR/apply.json" "$FIXTURES/sessions/namespace-restricted.yml"
  [ "$(jq .status.code <<<"$output")" = 403 ]
  [ "$(jq .status.message <<<"$output")" = "$(jq .status.message <<<"$scale")" ]
  [ "$(jq -c .warnings <<<"$output")" = "$(jq -c .warnings <<<"$scale")" ]
}

@test "a scale-up whose Memcached cannot be read is admitted with a warning naming the grant" {
  # The session answers the Namespace only: the Memcached read finds no recorded answer.
  run_baseline_replaying "$SCALE_UP" "$FIXTURES/sessions/namespace-restricted.yml"
  [ "$(jq .allowed <<<"$output")" = true ]
  [[ "$(jq -r '.warnings[-1]' <<<"$output")" == 'Memcached.memcached.c5c3.io "my-cache" could not be read ('*'): this scale-up was not judged against PodSecurity "restricted:latest" (enforced by namespace "default"), '*'get, list and watch on memcacheds.memcached.c5c3.io'* ]]
}

@test "a scale-down is never refused for Pod Security, where a scale-up would read and warn" {
  # An empty replay session: a scale-up reads, finds no recorded answer and warns (below); a
  # scale-down needs nothing (policy-wasm/src/request.rs proves it reads nothing).
  printf -- '---\n[]\n' >"$BATS_TEST_TMPDIR/empty.yml"
  run_baseline_replaying "$SCALE_UP" "$BATS_TEST_TMPDIR/empty.yml"
  [ "$(jq '.warnings | length' <<<"$output")" -ge 1 ]
  jq '.request.object.spec.replicas = 1' "$SCALE_UP" >"$BATS_TEST_TMPDIR/down.json"
  run_baseline_replaying "$BATS_TEST_TMPDIR/down.json" "$BATS_TEST_TMPDIR/empty.yml"
  [ "$(jq .allowed <<<"$output")" = true ]
  [ "$(jq '.warnings // [] | length' <<<"$output")" = 0 ]
}

@test "deploy/policy.yaml (protect, mutating) rejects an invalid CR with every error" {
  run --separate-stderr "$KWCTL" run --request-path "$INVALID" "${UNLABELLED[@]}" "$(local_manifest policy)"
  [ "$status" -eq 0 ]
  [ -z "$(fixture_mismatch seed-multiple-violations-v1beta1 "$(response "$output")")" ]
}

@test "deploy/policy.yaml (protect, mutating) defaults a valid CR" {
  run --separate-stderr "$KWCTL" run --request-path "$FIXTURES/requests/design-basic-cache-v1beta1.json" "${UNLABELLED[@]}" "$(local_manifest policy)"
  [ "$status" -eq 0 ]
  why=$(fixture_mismatch design-basic-cache-v1beta1 "$(response "$output")")
  [ -z "$why" ] || fail "$why"
}

@test "deploy/policy-audit.yaml (monitor, not mutating) admits an invalid CR untouched" {
  run --separate-stderr "$KWCTL" run --request-path "$INVALID" "${UNLABELLED[@]}" "$(local_manifest policy-audit)"
  [ "$status" -eq 0 ]
  got=$(response "$output")
  [ "$(jq .allowed <<<"$got")" = true ]
  [ "$(jq '.patch // null' <<<"$got")" = null ]
}

@test "deploy/policy-audit.yaml never mutates a CR that needs defaults" {
  run --separate-stderr "$KWCTL" run --request-path "$FIXTURES/requests/design-basic-cache-v1beta1.json" "${UNLABELLED[@]}" "$(local_manifest policy-audit)"
  [ "$status" -eq 0 ]
  got=$(response "$output")
  [ "$(jq .allowed <<<"$got")" = true ]
  [ "$(jq '.patch // null' <<<"$got")" = null ]
}

@test "kwctl inspect shows the annotated metadata and the policy README" {
  run --separate-stderr "$KWCTL" inspect --output yaml "$POLICY"
  [ "$status" -eq 0 ]
  inspected=$(python3 -c 'import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin)))' <<<"$output")
  metadata=$(python3 -c 'import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))' "$ROOT/metadata.yml")
  # Every field of metadata.yml but the annotations, which are checked below: a field kwctl
  # drops or renames (e.g. minimumKubewardenVersion, which kwctl run and policy-server enforce)
  # fails here. contextAwareResources is a set to Kubewarden (kwctl lists it sorted).
  for field in $(jq -r 'del(.annotations) | keys[]' <<<"$metadata"); do
    filter=".$field"
    [ "$field" != contextAwareResources ] || filter=".$field | sort"
    [ "$(jq -cS "$filter" <<<"$inspected")" = "$(jq -cS "$filter" <<<"$metadata")" ] || fail "$field: $(jq -c ".$field" <<<"$inspected")"
  done
  [ "$(jq -r '.protocolVersion' <<<"$inspected")" = v1 ]
  annotations=$(jq -c .annotations <<<"$inspected")
  # Every annotation of metadata.yml, plus the policy README as usage and kwctl's version.
  [ "$(jq -c --argjson want "$(jq .annotations <<<"$metadata")" '. as $got | $want | to_entries | map(select($got[.key] != .value))' <<<"$annotations")" = "[]" ]
  [ "$(jq -r '."io.kubewarden.policy.usage"' <<<"$annotations")" = "$(cat "$ROOT/policy-wasm/README.md")" ]
  [ "$(jq -r '."io.kubewarden.kwctl"' <<<"$annotations")" = "$("$KWCTL" --version 2>/dev/null | awk 'NR == 1 {print $2}')" ]
}

@test "kwctl scaffold manifest agrees with deploy/policy.yaml" {
  run --separate-stderr "$KWCTL" scaffold manifest --type ClusterAdmissionPolicy --title memcached "$POLICY"
  [ "$status" -eq 0 ]
  SCAFFOLDED="$output" python3 - "$ROOT/deploy/policy.yaml" <<'PY'
import json, os, sys, yaml
scaffolded, deployed = yaml.safe_load(os.environ["SCAFFOLDED"]), yaml.safe_load(open(sys.argv[1]))
pick = lambda p: {"kind": p["kind"], "name": p["metadata"]["name"], "annotations": p["metadata"].get("annotations"),
                  "rules": p["spec"]["rules"], "mutating": p["spec"]["mutating"]}
if pick(scaffolded) != pick(deployed):
    sys.exit(f"scaffolded {json.dumps(pick(scaffolded))}\n != deployed {json.dumps(pick(deployed))}")
PY
}

@test "artifacthub-pkg.yml is what kwctl scaffold artifacthub makes of metadata.yml, with the policy README" {
  # hack/artifacthub-pkg.py: kwctl scaffold artifacthub, then readme: policy-wasm/README.md. To a
  # file: bats' $output would lose the trailing newline of the last block scalar.
  KWCTL="$KWCTL" run --separate-stderr python3 "$ROOT/hack/artifacthub-pkg.py" -o "$BATS_TEST_TMPDIR/artifacthub-pkg.yml"
  [ "$status" -eq 0 ]
  python3 - "$BATS_TEST_TMPDIR/artifacthub-pkg.yml" "$ROOT/artifacthub-pkg.yml" <<'PY'
import sys, yaml
scaffolded, committed = (yaml.safe_load(open(path)) for path in sys.argv[1:])
for doc in (scaffolded, committed):
    doc.pop("createdAt", None)
if scaffolded != committed:
    keys = sorted(k for k in set(scaffolded) | set(committed) if scaffolded.get(k) != committed.get(k))
    sys.exit(f"artifacthub-pkg.yml is stale in {keys}: run `make artifacthub-pkg.yml`")
maintainer = committed["maintainers"][0]
assert maintainer["name"] and "@" in maintainer["email"], maintainer
PY
}
