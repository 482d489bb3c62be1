# memcached-operator: the Kubewarden policy (policy-wasm/), the controller (controller/) and their tests.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
CARGO ?= cargo
WASM_TARGET := wasm32-wasip1
# Cargo's target directory (honours CARGO_TARGET_DIR).
TARGET_DIR := $(abspath $(or $(CARGO_TARGET_DIR),target))
TMPDIR_OR_TMP := $(or $(TMPDIR),/tmp)
WASM_BUILD := $(TARGET_DIR)/$(WASM_TARGET)/release/memcached_policy.wasm
POLICY_SOURCES := $(shell find api/src policy-wasm/src -name '*.rs') api/Cargo.toml policy-wasm/Cargo.toml Cargo.toml Cargo.lock

E2E_BIN := target/e2e
CLUSTER_SOURCES := $(wildcard e2e-tests/cluster/*.go e2e-tests/cluster/cmd/kubectl/*.go) e2e-tests/cluster/go.mod e2e-tests/cluster/go.sum
NETNS := e2e-tests/netns.sh
# helm, built from its Go module at the version e2e-tests/tools/go.mod pins.
HELM := target/tools/helm
CHART := deploy/helm/memcached-operator

# Kubewarden's engines: on PATH, or through KWCTL / POLICY_SERVER, else ../shared/bin (what CI uses).
SHARED_BIN := $(abspath ../shared/bin)
KWCTL ?= $(or $(shell command -v kwctl),$(wildcard $(SHARED_BIN)/kwctl))
POLICY_SERVER ?= $(or $(shell command -v policy-server),$(wildcard $(SHARED_BIN)/policy-server))
export KWCTL POLICY_SERVER
# Debian packages the tests and the demo need, by the command that shows each is there.
DEPS := wasm-opt:binaryen bats:bats jq:jq memcached:memcached ip:iproute2 unshare:util-linux python3:python3 go:golang-go promtool:prometheus

.PHONY: all deps demo test unit-tests e2e e2e-tests e2e-manifests helm-test prometheus-test bench bench-e2e lint fmt fixtures crd clean

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

## annotated-policy.wasm: policy.wasm with metadata.yml and the policy's own README embedded (kwctl annotate).
annotated-policy.wasm: policy.wasm metadata.yml policy-wasm/README.md
	@test -n "$(KWCTL)" || { echo "kwctl not found: put it on PATH or set KWCTL (https://github.com/kubewarden/kwctl/releases)"; exit 1; }
	"$(KWCTL)" annotate -m metadata.yml -u policy-wasm/README.md -o $@ policy.wasm

## deps: the Debian packages the tests need; installed when root, else the apt-get line to run.
deps:
	@missing=(); for tool in $(DEPS); do command -v "$${tool%%:*}" >/dev/null || missing+=("$${tool##*:}"); done; \
	python3 -c 'import yaml' 2>/dev/null || missing+=(python3-yaml); \
	if [ $${#missing[@]} -eq 0 ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then echo "missing packages; run: sudo apt-get install -y $${missing[*]}"; exit 1; fi; \
	echo "installing $${missing[*]}"; \
	DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$${missing[@]}" >/dev/null

## demo: the policy judging every seed example, then the whole product on a local control plane
## (kubectl apply through the policy webhook, the controller, live status); DEMO_KEEP=1 keeps the cluster.
demo: policy.wasm $(E2E_BIN)/cluster
	$(CARGO) run --locked -q -p e2e-tests --bin demo
	$(CARGO) build --locked -q -p memcached-controller -p e2e-tests --features e2e-tests/cluster --bin memcached-controller --bin cluster-demo
	MEMCACHED_CONTROLLER=$(TARGET_DIR)/debug/memcached-controller $(NETNS) $(TARGET_DIR)/debug/cluster-demo

## target/e2e/{cluster,kubectl}: the Go control plane and kubectl, from upstream Kubernetes modules (Go caches the build).
$(E2E_BIN)/cluster: $(CLUSTER_SOURCES)
	cd e2e-tests/cluster && go build -trimpath -ldflags=-s -o ../../$(E2E_BIN)/ . ./cmd/kubectl

## target/tools/helm: helm from its Go module, version pinned by e2e-tests/tools/go.mod (Go caches the build).
$(HELM): e2e-tests/tools/go.mod e2e-tests/tools/go.sum
	cd e2e-tests/tools && go build -trimpath -o ../../$@ \
		-ldflags="-s -X helm.sh/helm/v3/internal/version.version=$$(go list -m -f '{{.Version}}' helm.sh/helm/v3)" \
		helm.sh/helm/v3/cmd/helm

## helm-test: helm lint (default values and ci/all-values.yaml), then helm template checked against deploy/
## (the controller's rules are deploy/rbac.yaml's, the templated CRD is deploy/crd.yaml, every option lands).
helm-test: $(HELM)
	$(HELM) lint --strict $(CHART) 2> >(grep -v 'found symbolic link' >&2)
	$(HELM) lint --strict $(CHART) -f $(CHART)/ci/all-values.yaml 2> >(grep -v 'found symbolic link' >&2)
	python3 deploy/helm/check_chart.py $(HELM) 2> >(grep -v 'found symbolic link' >&2)

## prometheus-test: promtool checks the alerts and the Grafana dashboard's queries, and unit-tests the alerts.
prometheus-test:
	@rm -rf "$(TMPDIR_OR_TMP)/prometheus-test"
	python3 deploy/prometheus/promtool_inputs.py "$(TMPDIR_OR_TMP)/prometheus-test"
	promtool check rules "$(TMPDIR_OR_TMP)"/prometheus-test/*.rules.yaml
	cp deploy/prometheus/memcached-operator-rules.test.yaml "$(TMPDIR_OR_TMP)/prometheus-test/"
	cd "$(TMPDIR_OR_TMP)/prometheus-test" && promtool test rules memcached-operator-rules.test.yaml

## test: every test: unit, policy through wasmtime, controller against real memcached and a mocked API server,
## packaging, kwctl suite, then the end-to-end scenarios on a real control plane.
test: unit-tests e2e

unit-tests: policy.wasm
	$(CARGO) test --locked --workspace
	python3 e2e-tests/check_metadata.py
	bats e2e-tests/kwctl.bats

## e2e: the scenarios of e2e-tests/tests/cluster.rs on a real control plane, in a private network namespace.
e2e: policy.wasm $(E2E_BIN)/cluster
	$(CARGO) build --locked -p memcached-controller --bin memcached-controller
	$(CARGO) test --locked --no-run -p e2e-tests --features cluster --test cluster
	MEMCACHED_CONTROLLER=$(TARGET_DIR)/debug/memcached-controller $(NETNS) $(CARGO) test --locked --offline -q -p e2e-tests --features cluster --test cluster

## e2e-manifests: every file of deploy/ and the chart rendered with default and all values, applied with
## --dry-run=server to the e2e control plane (its schemas, admission and RBAC checks).
e2e-manifests: policy.wasm $(E2E_BIN)/cluster $(HELM)
	$(CARGO) build --locked -p memcached-controller --bin memcached-controller
	$(CARGO) test --locked --no-run -p e2e-tests --features cluster --test manifests
	HELM=$(abspath $(HELM)) MEMCACHED_CONTROLLER=$(TARGET_DIR)/debug/memcached-controller \
		$(NETNS) $(CARGO) test --locked --offline -q -p e2e-tests --features cluster --test manifests

## e2e-tests: the fixtures through the built policy (waPC host on wasmtime, and kwctl when installed).
e2e-tests: policy.wasm
	$(CARGO) test --locked -p e2e-tests
	bats e2e-tests/kwctl.bats

## bench: policy size and latency (wasm against native); controller binary size and stats collection.
bench: policy.wasm
	$(CARGO) build --locked --release -p memcached-controller
	@echo "controller release binary: $$(stat -c %s $(TARGET_DIR)/release/memcached-controller) bytes"
	$(CARGO) bench --locked -p e2e-tests --bench latency
	$(CARGO) bench --locked -p memcached-controller --bench stats

## bench-e2e: control-plane start, apply -> Ready, admission latency seen by kube-apiserver, 200 CRs at once (release controller).
bench-e2e: policy.wasm $(E2E_BIN)/cluster
	$(CARGO) build --locked --release -p memcached-controller
	$(CARGO) bench --locked --no-run -p e2e-tests --features cluster --bench cluster
	MEMCACHED_CONTROLLER=$(TARGET_DIR)/release/memcached-controller $(NETNS) $(CARGO) bench --locked --offline -q -p e2e-tests --features cluster --bench cluster

## crd: regenerate deploy/crd.yaml from the API types.
crd:
	$(CARGO) run --locked -q -p memcached-controller -- crd > deploy/crd.yaml

## fixtures: regenerate e2e-tests/fixtures from the seed documents.
fixtures:
	cd e2e-tests/fixtures && python3 generate.py ../../../shared/seeds

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --locked --workspace --all-targets --features e2e-tests/cluster -- -D warnings
	cd e2e-tests/cluster && test -z "$$(gofmt -l .)" && go vet ./...

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
	rm -f policy.wasm annotated-policy.wasm
