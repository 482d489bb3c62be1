#!/usr/bin/env bats
# The policy fixtures through `kwctl run`, as a user with kwctl runs them.
# Skipped, with a message, where kwctl is not installed.

FIXTURES="$BATS_TEST_DIRNAME/fixtures"
ROOT="$BATS_TEST_DIRNAME/.."

setup() {
  command -v kwctl >/dev/null || skip "kwctl is not installed: install it from https://github.com/kubewarden/kwctl/releases to run this suite"
  command -v jq >/dev/null || skip "jq is not installed"
  POLICY="$ROOT/annotated-policy.wasm"
  [ -f "$POLICY" ] || make -C "$ROOT" annotated-policy.wasm >&2
}

# The AdmissionResponse kwctl printed, whether bare or inside an AdmissionReview.
response() { jq -c '.response // .' <<<"$1"; }

# The expected rejection message: the errors aggregated like apierrors.NewInvalid.
expected_message() {
  jq -r --arg name "$2" '(.errors | if length == 1 then .[0] else "[" + join(", ") + "]" end) as $agg
    | "Memcached.memcached.c5c3.io \"\($name)\" is invalid: \($agg)"' "$1"
}

# Apply the base64 JSONPatch of a response to the request's object.
patched_object() {
  python3 - "$1" "$2" <<'PY'
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
print(json.dumps(doc, sort_keys=True))
PY
}

@test "kwctl run gives every fixture its expected answer" {
  for request in "$FIXTURES"/requests/*.json; do
    name=$(basename "$request" .json)
    expected="$FIXTURES/expected/$name.json"
    run kwctl run --request-path "$request" --settings-json "$(jq -c .settings "$expected")" "$POLICY"
    [ "$status" -eq 0 ] || { echo "$name: kwctl failed: $output"; return 1; }
    got=$(response "$output")
    [ "$(jq .allowed <<<"$got")" = "$(jq .accepted "$expected")" ] || { echo "$name: $got"; return 1; }
    [ "$(jq -c '.warnings // []' <<<"$got")" = "$(jq -c .warnings "$expected")" ] || { echo "$name warnings: $got"; return 1; }
    if [ "$(jq .accepted "$expected")" = false ]; then
      object_name=$(jq -r '.request.object.metadata.name' "$request")
      [ "$(jq -r .status.message <<<"$got")" = "$(expected_message "$expected" "$object_name")" ] || { echo "$name message: $got"; return 1; }
      [ "$(jq .status.code <<<"$got")" = 400 ] || { echo "$name code: $got"; return 1; }
    elif [ "$(jq 'has("object")' "$expected")" = true ]; then
      [ "$(patched_object "$request" "$got")" = "$(jq -cS .object "$expected")" ] || { echo "$name mutation: $got"; return 1; }
    else
      [ "$(jq '.patch // null' <<<"$got")" = null ] || { echo "$name: unexpected mutation: $got"; return 1; }
    fi
  done
}

@test "kwctl rejects invalid settings" {
  run kwctl run --request-path "$FIXTURES/requests/seed-minimal-cr-after-defaulting-v1beta1.json" \
    --settings-json '{"memoryOverhead": "a lot"}' "$POLICY"
  [ "$status" -ne 0 ]
  [[ "$output" == *"memoryOverhead"* ]]
}
