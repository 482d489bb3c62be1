#!/usr/bin/env bats
# `make toolchain`, the first step of `make demo` and `make test`, in the states a user's rustup
# really is in. A stand-in `rustup` first on PATH answers what is installed and records what
# make asks of it; the real rustup is never called, so nothing is downloaded.

bats_require_minimum_version 1.5.0

ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
CHANNEL="$(sed -n 's/^channel *= *"\(.*\)"/\1/p' "$ROOT/rust-toolchain.toml")"

setup() {
  BIN="$BATS_TEST_TMPDIR/bin"
  mkdir -p "$BIN"
  # The stand-in answers `target list --installed` with $TARGETS and `component list
  # --installed` with $COMPONENTS (one per line), and logs every call.
  cat >"$BIN/rustup" <<'EOF'
#!/usr/bin/env bash
echo "$*" >>"$RUSTUP_LOG"
case "$1 $2" in
  "target list") printf '%b' "$TARGETS" ;;
  "component list") printf '%b' "$COMPONENTS" ;;
esac
EOF
  chmod +x "$BIN/rustup"
  export RUSTUP_LOG="$BATS_TEST_TMPDIR/rustup.log"
  : >"$RUSTUP_LOG"
  export COMPONENTS='cargo-x86_64-unknown-linux-gnu\nclippy-x86_64-unknown-linux-gnu\nrustfmt-x86_64-unknown-linux-gnu\n'
}

toolchain() {
  PATH="$BIN:$PATH" make -C "$ROOT" -s toolchain
}

@test "a toolchain without the wasm target gets it (the state that broke a new user's first run)" {
  export TARGETS='x86_64-unknown-linux-gnu\n'
  run toolchain
  [ "$status" -eq 0 ]
  grep -qx "toolchain install $CHANNEL --profile minimal --component rustfmt,clippy --target wasm32-wasip1" "$RUSTUP_LOG"
}

@test "a toolchain without clippy gets it" {
  export TARGETS='wasm32-wasip1\nx86_64-unknown-linux-gnu\n'
  export COMPONENTS='cargo-x86_64-unknown-linux-gnu\nrustfmt-x86_64-unknown-linux-gnu\n'
  run toolchain
  [ "$status" -eq 0 ]
  grep -q "^toolchain install $CHANNEL " "$RUSTUP_LOG"
}

@test "a toolchain that has everything installs nothing" {
  export TARGETS='wasm32-wasip1\nx86_64-unknown-linux-gnu\n'
  run toolchain
  [ "$status" -eq 0 ]
  ! grep -q "install" "$RUSTUP_LOG"
  grep -qx "target list --installed --toolchain $CHANNEL" "$RUSTUP_LOG"
}

@test "no toolchain at all: rustup installs it with its target" {
  # rustup fails to list for a toolchain it does not have.
  cat >"$BIN/rustup" <<'EOF'
#!/usr/bin/env bash
echo "$*" >>"$RUSTUP_LOG"
[ "$1" = toolchain ] || exit 1
EOF
  run toolchain
  [ "$status" -eq 0 ]
  grep -qx "toolchain install $CHANNEL --profile minimal --component rustfmt,clippy --target wasm32-wasip1" "$RUSTUP_LOG"
}

@test "without rustup, make leaves the toolchain to cargo" {
  # A PATH with make and the shell's tools but no rustup.
  mkdir -p "$BATS_TEST_TMPDIR/norustup"
  for tool in make bash sh sed grep; do ln -s "$(command -v $tool)" "$BATS_TEST_TMPDIR/norustup/$tool"; done
  run env PATH="$BATS_TEST_TMPDIR/norustup" make -C "$ROOT" -s toolchain
  [ "$status" -eq 0 ]
  [ ! -s "$RUSTUP_LOG" ]
}
