# memcached-operator: the Kubewarden policy (policy-wasm/), the controller (controller/) and their tests.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
CARGO ?= cargo
WASM_TARGET := wasm32-wasip1
WASM_BUILD := target/$(WASM_TARGET)/release/memcached_policy.wasm
POLICY_SOURCES := $(shell find api/src policy-wasm/src -name '*.rs') api/Cargo.toml policy-wasm/Cargo.toml Cargo.toml Cargo.lock

.PHONY: all demo test e2e-tests bench lint fmt fixtures crd clean

all: policy.wasm

## policy.wasm: the policy, release build, size-optimised with wasm-opt (Debian's binaryen) when present.
policy.wasm: $(POLICY_SOURCES)
	$(CARGO) build --locked --release --target $(WASM_TARGET) -p memcached-policy
	@if command -v wasm-opt >/dev/null; then \
		wasm-opt -Oz --enable-bulk-memory --enable-sign-ext --enable-nontrapping-float-to-int \
			--enable-mutable-globals $(WASM_BUILD) -o $@; \
	else \
		echo "wasm-opt not found (apt-get install binaryen): shipping the unoptimised module"; cp $(WASM_BUILD) $@; \
	fi
	@echo "policy.wasm: $$(stat -c %s $@) bytes"

## annotated-policy.wasm: policy.wasm with metadata.yml embedded (needs kwctl).
annotated-policy.wasm: policy.wasm metadata.yml README.md
	@command -v kwctl >/dev/null || { echo "kwctl is not installed: see https://github.com/kubewarden/kwctl"; exit 1; }
	kwctl annotate -m metadata.yml -u README.md -o $@ policy.wasm

## demo: build the policy and show it judging every seed example, then the objects the controller makes of one.
demo: policy.wasm
	$(CARGO) run --locked -q -p e2e-tests --bin demo
	@echo; echo "== memcached-controller render -f deploy/examples/secure-cache.yaml"
	$(CARGO) run --locked -q -p memcached-controller -- render -f deploy/examples/secure-cache.yaml

## test: every test: unit, policy through wasmtime, controller against real memcached and a mocked API server, packaging, kwctl suite.
test: policy.wasm
	$(CARGO) test --locked --workspace
	python3 e2e-tests/check_metadata.py
	bats e2e-tests/kwctl.bats

## e2e-tests: the fixtures through the built policy (waPC host on wasmtime, and kwctl when installed).
e2e-tests: policy.wasm
	$(CARGO) test --locked -p e2e-tests
	bats e2e-tests/kwctl.bats

## bench: policy size and latency (wasm against native); controller binary size and stats collection.
bench: policy.wasm
	$(CARGO) build --locked --release -p memcached-controller
	@echo "controller release binary: $$(stat -c %s target/release/memcached-controller) bytes"
	$(CARGO) bench --locked -p e2e-tests --bench latency
	$(CARGO) bench --locked -p memcached-controller --bench stats

## crd: regenerate deploy/crd.yaml from the API types.
crd:
	$(CARGO) run --locked -q -p memcached-controller -- crd > deploy/crd.yaml

## fixtures: regenerate e2e-tests/fixtures from the seed documents.
fixtures:
	cd e2e-tests/fixtures && python3 generate.py ../../../shared/seeds

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --locked --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
	rm -f policy.wasm annotated-policy.wasm
