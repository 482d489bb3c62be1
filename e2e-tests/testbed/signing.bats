#!/usr/bin/env bats
# The signed artifact: `make push` (deploy/push-policy.sh) pushes annotated-policy.wasm to a local OCI
# registry (CNCF Distribution, target/e2e/registry) and signs the pushed digest with cosign v2
# (target/tools/cosign, key-based, no transparency log); Kubewarden's own engines then judge it offline:
# kwctl verify and policy-server with a verification config accept it under the release key only, and
# refuse an unsigned or re-pushed artifact.
#
# kwctl and policy-server come from $KWCTL / $POLICY_SERVER, PATH, or ../shared/bin (CI). Without them
# the suite skips, except where ../shared/bin exists: there a skip would prove nothing, so it fails.
# Both log to stderr (offline: a Sigstore warning), never parsed here: kwctl is judged by its exit
# status, policy-server by its exit status, its JSON log lines and its answers.

# shellcheck disable=SC2154 # status, output and stderr are set by bats' run
bats_require_minimum_version 1.5.0

ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"

engine() { # engine NAME VARIABLE: the path of Kubewarden's NAME, or empty
  local path=${!2:-}
  [ -n "$path" ] || path=$(command -v "$1" || true)
  [ -n "$path" ] || [ ! -x "$ROOT/../shared/bin/$1" ] || path="$ROOT/../shared/bin/$1"
  echo "$path"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

setup_file() {
  KWCTL=$(engine kwctl KWCTL)
  POLICY_SERVER=$(engine policy-server POLICY_SERVER)
  export KWCTL POLICY_SERVER
  [ -n "$KWCTL" ] && [ -n "$POLICY_SERVER" ] || return 0
  # make rebuilds what is stale; cosign's first build takes minutes (Go caches it).
  make -C "$ROOT" -s annotated-policy.wasm target/e2e/registry target/tools/cosign >&2
  export COSIGN="$ROOT/target/tools/cosign" WORK="$BATS_FILE_TMPDIR"
  export VERSION
  VERSION=v$(sed -n 's/^ *io.kubewarden.policy.version: *//p' "$ROOT/metadata.yml")

  # The registry, on a free port of loopback, marked insecure (plain HTTP) for kwctl and policy-server.
  REGISTRY=127.0.0.1:$(free_port)
  export REGISTRY SOURCES="$WORK/sources.yml"
  printf 'version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n' \
    "$WORK/registry" "$REGISTRY" >"$WORK/registry.yml"
  printf 'insecure_sources:\n  - "%s"\n' "$REGISTRY" >"$SOURCES"
  "$ROOT/target/e2e/registry" serve "$WORK/registry.yml" >"$WORK/registry.log" 2>&1 &
  echo $! >"$WORK/registry.pid"
  for _ in $(seq 100); do
    curl -sf "http://$REGISTRY/v2/" >/dev/null && break
    sleep 0.1
  done
  curl -sf "http://$REGISTRY/v2/" >/dev/null || { cat "$WORK/registry.log" >&2; return 1; }

  # The release key and a stranger's, both password-protected as cosign writes them.
  export COSIGN_PASSWORD=bats-signing-test
  "$COSIGN" generate-key-pair --output-key-prefix "$WORK/release" >/dev/null 2>&1
  "$COSIGN" generate-key-pair --output-key-prefix "$WORK/other" >/dev/null 2>&1
  # The offline Sigstore trust config both engines need (see e2e-tests/testbed/sigstore-trust-config.sh).
  "$ROOT/e2e-tests/testbed/sigstore-trust-config.sh" >"$WORK/trust-config.json"
  "$ROOT/e2e-tests/testbed/verification-config.sh" "$WORK/release.pub" "memcached-operator release" >"$WORK/verify-release.yml"
  "$ROOT/e2e-tests/testbed/verification-config.sh" "$WORK/other.pub" >"$WORK/verify-other.yml"

  # What a release does: make push with the key. Its last stdout line is the signed immutable reference.
  make -C "$ROOT" -s push REGISTRY="$REGISTRY/signed" COSIGN_KEY="$WORK/release.key" SOURCES_PATH="$SOURCES" \
    >"$WORK/push-signed.out" 2>"$WORK/push-signed.err" || { cat "$WORK/push-signed.err" >&2; return 1; }
  export SIGNED="registry://$REGISTRY/signed/policies/memcached:$VERSION"
  SIGNED_DIGEST_REF=$(tail -1 "$WORK/push-signed.out")
  export SIGNED_DIGEST_REF
  # A deliberate unsigned push of the same artifact elsewhere.
  make -C "$ROOT" -s push REGISTRY="$REGISTRY/unsigned" SIGN=no SOURCES_PATH="$SOURCES" \
    >"$WORK/push-unsigned.out" 2>"$WORK/push-unsigned.err" || { cat "$WORK/push-unsigned.err" >&2; return 1; }
  export UNSIGNED="registry://$REGISTRY/unsigned/policies/memcached:$VERSION"
}

teardown_file() {
  [ ! -f "$WORK/registry.pid" ] || kill "$(cat "$WORK/registry.pid")" 2>/dev/null || true
}

setup() {
  if [ -z "$KWCTL" ] || [ -z "$POLICY_SERVER" ]; then
    [ ! -d "$ROOT/../shared/bin" ] || fail "../shared/bin exists but has no kwctl or policy-server: this suite must run, not skip"
    skip "kwctl and policy-server not found: put them on PATH or set KWCTL and POLICY_SERVER"
  fi
  command -v jq >/dev/null || fail "jq is needed (make deps)"
}

fail() { echo "$*" >&2; return 1; }

# kwctl verify of a registry:// reference, offline, with the extra arguments given (keys, config).
verify() {
  local reference=$1
  shift
  run --separate-stderr "$KWCTL" verify --sources-path "$SOURCES" --sigstore-trust-config "$WORK/trust-config.json" "$@" "$reference"
}

# The manifest digest the registry serves for repository:tag.
served_digest() {
  curl -sfI -H 'Accept: application/vnd.oci.image.manifest.v1+json' "http://$REGISTRY/v2/$1/manifests/$2" \
    | tr -d '\r' | sed -n 's/^[Dd]ocker-[Cc]ontent-[Dd]igest: //p'
}

@test "make push refuses to push without COSIGN_KEY unless SIGN=no, and pushes nothing" {
  run make -C "$ROOT" -s push REGISTRY="$REGISTRY/refused" SOURCES_PATH="$SOURCES"
  [ "$status" -ne 0 ]
  [[ "$output" == *"COSIGN_KEY"*"SIGN=no"* ]] || fail "$output"
  [ -z "$(served_digest refused/policies/memcached "$VERSION")" ]
}

@test "make push with a wrong COSIGN_PASSWORD pushes nothing" {
  COSIGN_PASSWORD=wrong run make -C "$ROOT" -s push REGISTRY="$REGISTRY/wrong-password" \
    COSIGN_KEY="$WORK/release.key" SOURCES_PATH="$SOURCES"
  [ "$status" -ne 0 ]
  [[ "$output" == *"cannot open"* ]] || fail "$output"
  [ -z "$(served_digest wrong-password/policies/memcached "$VERSION")" ]
}

@test "make push signs the digest it pushed, and that digest is the tag's" {
  digest=${SIGNED_DIGEST_REF##*@}
  [[ "$SIGNED_DIGEST_REF" == "registry://$REGISTRY/signed/policies/memcached@sha256:"* ]] || fail "$SIGNED_DIGEST_REF"
  [ "$(served_digest signed/policies/memcached "$VERSION")" = "$digest" ]
  tags=$(curl -sf "http://$REGISTRY/v2/signed/policies/memcached/tags/list" | jq -c '.tags | sort')
  [ "$tags" = "$(jq -cn --arg sig "${digest/:/-}.sig" --arg v "$VERSION" '[$sig, $v] | sort')" ] || fail "$tags"
  grep -q "signed .*@$digest" "$WORK/push-signed.err"
  # The unsigned push is the same artifact (same digest), with no signature beside it.
  [ "$(served_digest unsigned/policies/memcached "$VERSION")" = "$digest" ]
  [ "$(curl -sf "http://$REGISTRY/v2/unsigned/policies/memcached/tags/list" | jq -c .tags)" = "[\"$VERSION\"]" ]
}

@test "kwctl verify accepts the signed artifact with the release key (tag, digest, verification config)" {
  verify "$SIGNED" -k "$WORK/release.pub"
  [ "$status" -eq 0 ] || fail "$stderr"
  verify "$SIGNED_DIGEST_REF" -k "$WORK/release.pub"
  [ "$status" -eq 0 ] || fail "$stderr"
  verify "$SIGNED" --verification-config-path "$WORK/verify-release.yml"
  [ "$status" -eq 0 ] || fail "$stderr"
}

@test "kwctl verify refuses the signed artifact with another key" {
  verify "$SIGNED" -k "$WORK/other.pub"
  [ "$status" -ne 0 ]
  verify "$SIGNED" --verification-config-path "$WORK/verify-other.yml"
  [ "$status" -ne 0 ]
}

@test "kwctl verify refuses the unsigned artifact (make push SIGN=no)" {
  grep -q UNSIGNED "$WORK/push-unsigned.err"
  verify "$UNSIGNED" -k "$WORK/release.pub"
  [ "$status" -ne 0 ]
}

@test "kwctl verify refuses a tag re-pushed with another artifact, and still accepts the signed digest" {
  make -C "$ROOT" -s push REGISTRY="$REGISTRY/repushed" COSIGN_KEY="$WORK/release.key" SOURCES_PATH="$SOURCES" \
    >"$WORK/repushed.out" 2>"$WORK/repushed.err" || fail "$(cat "$WORK/repushed.err")"
  signed=$(tail -1 "$WORK/repushed.out")
  tag="registry://$REGISTRY/repushed/policies/memcached:$VERSION"
  verify "$tag" -k "$WORK/release.pub"
  [ "$status" -eq 0 ] || fail "$stderr"
  # Another artifact (one more annotation, so another digest) pushed over the tag, unsigned, through
  # the same script make push runs.
  sed 's/^annotations:$/annotations:\n  io.kubewarden.policy.description.extra: re-pushed/' "$ROOT/metadata.yml" >"$BATS_TEST_TMPDIR/metadata.yml"
  grep -q re-pushed "$BATS_TEST_TMPDIR/metadata.yml"
  "$KWCTL" annotate -m "$BATS_TEST_TMPDIR/metadata.yml" -o "$BATS_TEST_TMPDIR/other.wasm" "$ROOT/policy.wasm" 2>/dev/null
  run --separate-stderr env SIGN=no KWCTL="$KWCTL" SOURCES_PATH="$SOURCES" \
    "$ROOT/deploy/push-policy.sh" "$BATS_TEST_TMPDIR/other.wasm" "$tag"
  [ "$status" -eq 0 ] || fail "$stderr"
  repushed=$output
  [ "${repushed##*@}" != "${signed##*@}" ] || fail "the re-push did not change the digest"
  [ "$(served_digest repushed/policies/memcached "$VERSION")" = "${repushed##*@}" ]
  verify "$tag" -k "$WORK/release.pub"
  [ "$status" -ne 0 ]
  verify "$repushed" -k "$WORK/release.pub"
  [ "$status" -ne 0 ]
  verify "$signed" -k "$WORK/release.pub"
  [ "$status" -eq 0 ] || fail "$stderr"
}

# policy-server, as kubewarden-controller runs it with a PolicyServer's spec.verificationConfig and
# spec.sigstoreTrustConfig, serving the policy from `module`; waits until it is ready (status 0) or
# has exited (its status). The JSON log is $BATS_TEST_TMPDIR/policy-server.log.
policy_server() {
  local module=$1 verification=$2 trust=${3:-} dir=$BATS_TEST_TMPDIR
  [ -f "$dir/tls.crt" ] || openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
    -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout "$dir/tls.key" -out "$dir/tls.crt" 2>/dev/null
  jq -n --arg url "$module" '{memcached: {"module": $url, settings: {}, allowedToMutate: true, policyMode: "protect"}}' \
    >"$dir/policies.yml" || fail "cannot write policies.yml"
  rm -rf "$dir/policies" && mkdir "$dir/policies"
  PORT=$(free_port) READINESS=$(free_port)
  local trust_args=()
  [ -z "$trust" ] || trust_args=(--sigstore-trust-config "$trust")
  "$POLICY_SERVER" --policies "$dir/policies.yml" --sources-path "$SOURCES" --verification-path "$verification" \
    "${trust_args[@]}" --policies-download-dir "$dir/policies" --sigstore-cache-dir "$dir/sigstore-data" \
    --cert-file "$dir/tls.crt" --key-file "$dir/tls.key" --addr 127.0.0.1 --port "$PORT" \
    --readiness-probe-port "$READINESS" --ignore-kubernetes-connection-failure --log-fmt json --log-no-color \
    >"$dir/policy-server.log" 2>&1 &
  PID=$!
  echo "$PID" >"$dir/policy-server.pid"
  for _ in $(seq 600); do
    if ! kill -0 "$PID" 2>/dev/null; then
      wait "$PID"
      return
    fi
    curl -sf "http://127.0.0.1:$READINESS/readiness" >/dev/null && return 0
    sleep 0.1
  done
  fail "policy-server neither ready nor gone after 60 s: $(tail -5 "$dir/policy-server.log")"
}

# (policy_server may have run in `run`'s subshell: its pid is in a file.)
stop_policy_server() {
  local pid
  pid=$(cat "$BATS_TEST_TMPDIR/policy-server.pid" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
}

# The JSON lines of policy-server's log (it also prints plain text and backtraces) matching a jq filter.
logged() { jq -cR "fromjson? | select($1)" "$BATS_TEST_TMPDIR/policy-server.log"; }

@test "policy-server requiring the release key loads the signed policy and judges with it" {
  policy_server "$SIGNED" "$WORK/verify-release.yml" "$WORK/trust-config.json" || fail "policy-server exited: $(grep -v '^ ' "$BATS_TEST_TMPDIR/policy-server.log" | tail -3)"
  [ -n "$(logged '.fields.status == "verified-signatures"')" ] && [ -n "$(logged '.fields.status == "verified-local-checksum"')" ] \
    || { stop_policy_server; fail "no verification logged"; }
  answer=$(curl -sf --cacert "$BATS_TEST_TMPDIR/tls.crt" -H 'Content-Type: application/json' \
    --data @"$ROOT/e2e-tests/fixtures/requests/seed-multiple-violations-v1beta1.json" \
    "https://127.0.0.1:$PORT/validate/memcached")
  stop_policy_server
  [ "$(jq .response.allowed <<<"$answer")" = false ] || fail "$answer"
}

@test "policy-server requiring the release key refuses to start on the unsigned policy" {
  run policy_server "$UNSIGNED" "$WORK/verify-release.yml" "$WORK/trust-config.json"
  stop_policy_server
  [ "$status" -ne 0 ]
  # The reason itself (policy-fetcher's verify/mod.rs), not any failure to fetch.
  grep -qF "Policy 'memcached' cannot be verified: no signatures found for image" "$BATS_TEST_TMPDIR/policy-server.log"
}

@test "policy-server requiring another key refuses to start on the signed policy" {
  run policy_server "$SIGNED" "$WORK/verify-other.yml" "$WORK/trust-config.json"
  stop_policy_server
  [ "$status" -ne 0 ]
  grep -qF "Policy 'memcached' cannot be verified: Image verification failed: missing signatures" "$BATS_TEST_TMPDIR/policy-server.log"
}

@test "policy-server without a Sigstore trust config verifies only if it reached Sigstore's TUF repository" {
  # policy-server 1.35 builds its verifier from the trust root: when it cannot fetch that (offline, as
  # here), it loads every policy UNVERIFIED despite --verification-path. Hence the trust config above
  # (a PolicyServer's spec.sigstoreTrustConfig in a cluster).
  run policy_server "$UNSIGNED" "$WORK/verify-release.yml"
  stop_policy_server
  if [ -n "$(logged '.fields.message == "Cannot create Sigstore trust root, verification relying on Rekor and Fulcio will fail"')" ]; then
    [ "$status" -eq 0 ] || fail "offline without a trust config policy-server refused: the fail-open is gone, revisit this test"
    [ -n "$(logged '.fields.message == "policy download" and .fields.name == "memcached"')" ]
    [ -z "$(logged '.fields.status == "verified-signatures"')" ]
  else
    [ "$status" -ne 0 ]
  fi
}
