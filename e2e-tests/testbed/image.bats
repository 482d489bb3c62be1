#!/usr/bin/env bats
# deploy/image.sh (`make image`): the controller's OCI image, built from the debug binary here (the
# release build is what `make image` packs; the image is the same but for the binary's size). It runs
# as its config says, from nothing but what it holds, as the nonroot user on a read-only root.

bats_require_minimum_version 1.5.0

ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"

setup_file() {
  local binary="${CARGO_TARGET_DIR:-$ROOT/target}/debug/memcached-controller"
  [ -x "$binary" ] || (cd "$ROOT" && cargo build --locked -q -p memcached-controller)
  export LAYOUT="$BATS_FILE_TMPDIR/layout" BUNDLE="$BATS_FILE_TMPDIR/bundle" BINARY="$binary"
  "$ROOT/deploy/image.sh" "$binary" "$LAYOUT" test
  umoci unpack --image "$LAYOUT:test" "$BUNDLE" >/dev/null
}

# Run the image's entrypoint with ARGS as its config's user, chrooted into the unpacked image
# mounted read-only (a mount namespace of its own); stdin is passed through.
in_image() {
  unshare -m sh -c 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec chroot --userspec=65532:65532 "$0" /memcached-controller "$@"' \
    "$BUNDLE/rootfs" "$@"
}

@test "the config runs the controller as the nonroot user: run --leader-election" {
  run skopeo inspect --config "oci:$LAYOUT:test"
  [ "$status" -eq 0 ]
  [ "$(jq -r '.config.User' <<<"$output")" = "65532:65532" ]
  [ "$(jq -c '.config.Entrypoint' <<<"$output")" = '["/memcached-controller"]' ]
  [ "$(jq -c '.config.Cmd' <<<"$output")" = '["run","--leader-election"]' ]
  [ "$(jq -r '.config.Labels["org.opencontainers.image.version"]' <<<"$output")" = "$("$BINARY" --version | awk '{print $NF}')" ]
}

@test "it holds the binary, the libraries it links and the user database: no shell" {
  run -127 chroot "$BUNDLE/rootfs" /bin/sh -c true
  run find "$BUNDLE/rootfs" -type f
  [ "$status" -eq 0 ]
  while read -r file; do
    case "${file#"$BUNDLE/rootfs"}" in
      /memcached-controller | /etc/passwd | /etc/group | /lib*/*.so* | /usr/lib*/*.so*) ;;
      *) echo "unexpected file in the image: $file"; false ;;
    esac
  done <<<"$output"
}

@test "the controller runs from it as 65532 on a read-only root filesystem" {
  run in_image --version
  [ "$status" -eq 0 ]
  [[ "$output" == "memcached-controller "* ]]
  run in_image render --filename - <<'YAML'
apiVersion: memcached.c5c3.io/v1beta1
kind: Memcached
metadata: {name: cache, namespace: team-a}
spec: {replicas: 2}
YAML
  [ "$status" -eq 0 ]
  grep -qx 'kind: Deployment' <<<"$output"
  grep -qx '  replicas: 2' <<<"$output"
}

@test "building the tag again replaces it" {
  run "$ROOT/deploy/image.sh" "$BINARY" "$LAYOUT" test
  [ "$status" -eq 0 ]
  [ "$(umoci ls --layout "$LAYOUT")" = "test" ]
}

@test "the Dockerfile's build context holds the workspace's sources, not cargo's target/ or git" {
  # What `docker build .` sends: every tracked file, none of the ignored paths (.dockerignore).
  ignored=$(grep -v '^#' "$ROOT/.dockerignore" | sed 's|^/||; s|/$||' | grep .)
  grep -qx target <<<"$ignored"
  grep -qx .git <<<"$ignored"
  # Nothing the Dockerfile's build needs is left out.
  for needed in Cargo.toml Cargo.lock api controller policy-wasm e2e-tests test-support; do
    if grep -qx "$needed" <<<"$ignored"; then echo ".dockerignore leaves out $needed"; false; fi
  done
}
