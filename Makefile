# memcached-operator: the Kubewarden policy (policy-wasm/), the controller (controller/) and their tests.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
CARGO ?= cargo
WASM_TARGET := wasm32-wasip1
# Cargo's target directory (honours CARGO_TARGET_DIR).
CARGO_TARGET_DIR ?=
TARGET_DIR := $(abspath $(or $(CARGO_TARGET_DIR),target))
TMPDIR ?=
TMPDIR_OR_TMP := $(or $(TMPDIR),/tmp)
WASM_BUILD := $(TARGET_DIR)/$(WASM_TARGET)/release/memcached_policy.wasm
POLICY_SOURCES := $(shell find api/src policy-wasm/src -name '*.rs') api/Cargo.toml policy-wasm/Cargo.toml Cargo.toml Cargo.lock

E2E_BIN := target/e2e
CLUSTER_SOURCES := $(wildcard e2e-tests/testbed/local-cluster/*.go e2e-tests/testbed/local-cluster/*.yaml e2e-tests/testbed/local-cluster/cmd/kubectl/*.go) e2e-tests/testbed/local-cluster/go.mod e2e-tests/testbed/local-cluster/go.sum
REGISTRY_SOURCES := e2e-tests/testbed/registry/main.go e2e-tests/testbed/registry/go.mod e2e-tests/testbed/registry/go.sum
NETNS := e2e-tests/testbed/netns.sh
# helm, built from its Go module at the version e2e-tests/testbed/tools/go.mod pins.
HELM := target/tools/helm
# cosign v2, built from its Go module beside helm: `make push` signs with it.
COSIGN := target/tools/cosign
# What the programs on the control plane need: the control plane and kubectl, the registry, helm.
CLUSTER_PIECES := $(E2E_BIN)/local-cluster $(E2E_BIN)/registry $(HELM)
# Today's memcached from Debian (sid, else trixie) in a root filesystem of its own, with its own libraries
# (e2e-tests/testbed/local-cluster/images/memcached-newest.sh): the real node's memcached:1.6, and the newest release the controller's
# tests run beside the host's (they find it through MEMCACHED_NEWEST, its root filesystem).
NEWEST_MEMCACHED_DIR := $(E2E_BIN)/memcached-newest
MEMCACHED_NEWEST := $(abspath $(NEWEST_MEMCACHED_DIR))/rootfs
export MEMCACHED_NEWEST
# What the real node needs besides: kubelet, kube-proxy, containerd, CoreDNS, the node's images and Kubewarden's.
NODE_PIECES := $(E2E_BIN)/kubelet $(E2E_BIN)/kube-proxy $(E2E_BIN)/containerd $(E2E_BIN)/coredns \
	$(NEWEST_MEMCACHED_DIR)/version $(E2E_BIN)/images/index.json $(E2E_BIN)/kubewarden/images/index.json $(E2E_BIN)/prometheus/images/index.json
CHART := deploy/helm/memcached-operator
# When this make began (seconds since the epoch): `make demo`'s progress lines count from it.
MAKE_STARTED := $(shell date +%s)
# The pieces `make demo` builds after the policy's verdicts, in order, each `target|what it is (cold cost)`:
# hack/build-pieces.sh prints one line each, the compilers' output in $(DEMO_LOGS). Cold costs as last measured
# on a fresh 2-core machine (docs/numbers.md, "The first run").
DEMO_LOGS := $(TARGET_DIR)/demo-logs
DEMO_PIECES := \
	'$(E2E_BIN)/local-cluster|the control plane and kubectl (Go: Kubernetes, about 9 min cold)' \
	'$(E2E_BIN)/registry|CNCF Distribution, the local OCI registry (Go, about 1 min cold)' \
	'$(HELM)|helm (Go, about 1 min cold)' \
	'$(E2E_BIN)/kubelet|the kubelet (Go, about 1 min cold)' \
	'$(E2E_BIN)/kube-proxy|kube-proxy (Go, under 1 min cold)' \
	'$(E2E_BIN)/containerd|containerd and its runc shim (Go, about 2 min cold)' \
	'$(E2E_BIN)/coredns|CoreDNS (Go, about 2 min cold)' \
	'$(E2E_BIN)/memcached_exporter|memcached_exporter (Go, under 1 min cold)' \
	'$(NEWEST_MEMCACHED_DIR)/version|today'"'"'s memcached from Debian sid with its own libraries (apt, under 1 min)' \
	'$(E2E_BIN)/images/index.json|the node images: memcached (today'"'"'s and the host'"'"'s), pause, the exporter (under 1 min)' \
	'$(E2E_BIN)/kubewarden/images/index.json|Kubewarden 1.35 images: controller, audit scanner, policy-server (Go, about 3 min cold)' \
	'$(E2E_BIN)/prometheus/images/index.json|Prometheus and Prometheus Operator images (Go, about 4 min cold)'
# The Rust build, beside the Go ones from their start (hack/build-pieces.sh --beside).
DEMO_BESIDE := 'bins|the controller and the demo driver (Rust, about 6 min cold)'

# The one feature set every build uses: the end-to-end suites and the tests that need memcached or policy.wasm
# (plain `cargo test` runs only the tests that need no external tool).
FEATURES := e2e-tests/cluster,e2e-tests/real-node,memcached-controller/external-tools

# Kubewarden's engines: on PATH, or through KWCTL / POLICY_SERVER, else ../shared/bin (what CI uses).
SHARED_BIN := $(abspath ../shared/bin)
KWCTL ?= $(or $(shell command -v kwctl),$(wildcard $(SHARED_BIN)/kwctl))
POLICY_SERVER ?= $(or $(shell command -v policy-server),$(wildcard $(SHARED_BIN)/policy-server))
# Kubewarden's Helm charts of the same release (1.35.0): KUBEWARDEN_CHARTS, else ../shared/kubewarden.
KUBEWARDEN_CHARTS ?= $(abspath ../shared/kubewarden)
export KWCTL POLICY_SERVER KUBEWARDEN_CHARTS
# Debian packages the tests and the demo need, by the command that shows each is there.
DEPS := wasm-opt:binaryen bats:bats jq:jq curl:curl memcached:memcached ip:iproute2 unshare:util-linux python3:python3 promtool:prometheus \
	runc:runc /usr/lib/cni/bridge:containernetworking-plugins catatonit:catatonit umoci:umoci skopeo:skopeo \
	busybox:busybox-static faketime:faketime iptables:iptables unzip:unzip openssl:openssl readelf:binutils

.PHONY: all help prereqs toolchain deps demo bins test unit-tests kwctl-tests e2e e2e-node e2e-tests helm-test prometheus-test bench bench-e2e bench-big-cache bench-kwctl bench-guest bench-rollout bench-kubewarden bench-moves push push-chart image push-image lint fmt fixtures crd clean

all: policy.wasm

## help: the documented targets, each with the first sentence of its `## target:` comment.
help:
	@awk '/^## [^ :]+:/ { if (t) print t; t = substr($$0, 4); next } \
		/^## / && t { t = t " " substr($$0, 4); next } { if (t) print t; t = "" }' $(MAKEFILE_LIST) \
		| sed 's/^\([^:]*\): /\1\t/; s/\. .*/./' | awk -F'\t' '{ printf "  %-30s %s\n", $$1, $$2 }'

## toolchain: the Rust toolchain of rust-toolchain.toml with its wasm target, rustfmt and clippy. rustup adds
## a toolchain file's targets only when it installs the toolchain itself, so a toolchain already present
## without them (the usual state of anyone who has Rust) gets them here. Without rustup, cargo must have them.
RUST_CHANNEL := $(shell sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)
toolchain:
	@if command -v rustup >/dev/null; then \
		targets=$$(rustup target list --installed --toolchain $(RUST_CHANNEL) 2>/dev/null || true); \
		components=$$(rustup component list --installed --toolchain $(RUST_CHANNEL) 2>/dev/null || true); \
		if ! grep -qx '$(WASM_TARGET)' <<<"$$targets" || ! grep -q '^rustfmt' <<<"$$components" \
			|| ! grep -q '^clippy' <<<"$$components"; then \
			rustup toolchain install $(RUST_CHANNEL) --profile minimal --component rustfmt,clippy \
				--target $(WASM_TARGET); \
		fi; \
	fi

## policy.wasm: the policy, release build, size-optimised with wasm-opt (Debian's binaryen) when present.
policy.wasm: $(POLICY_SOURCES) | toolchain
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

## artifacthub-pkg.yml: the Artifact Hub package, generated by kwctl from metadata.yml and questions-ui.yml, with the
## policy's own README as the page Artifact Hub shows (hack/artifacthub-pkg.py).
artifacthub-pkg.yml: metadata.yml questions-ui.yml policy-wasm/README.md hack/artifacthub-pkg.py
	@test -n "$(KWCTL)" || { echo "kwctl not found: put it on PATH or set KWCTL"; exit 1; }
	KWCTL="$(KWCTL)" hack/artifacthub-pkg.py -o $@

## prereqs: what the build needs and cannot install, one line each on what to install: Go as new as the modules'
## `go` directive (Debian 12's golang-go is too old), kwctl and policy-server 1.35.0, Kubewarden 1.35's charts,
## root or unprivileged user namespaces, 8 GiB of free disk (hack/prereqs.sh). Before a first build it says what comes and how long.
# A cold `make demo` on a fresh 2-core machine with empty Go and cargo caches, as last measured (README).
FIRST_RUN_MINUTES := 30
BUILT_PIECES := $(CLUSTER_PIECES) $(NODE_PIECES) $(TARGET_DIR)/debug/cluster-demo
prereqs:
	@hack/prereqs.sh "$(KWCTL)" "$(POLICY_SERVER)" "$(KUBEWARDEN_CHARTS)"
	@if [ -n "$(filter-out $(wildcard $(BUILT_PIECES)),$(BUILT_PIECES))" ]; then \
		echo "First run: the policy compiles in a few minutes; then Kubernetes (control plane, kubectl, kubelet,"; \
		echo "kube-proxy), containerd, CoreDNS, helm, cosign, Kubewarden's controller, Prometheus and its operator, and"; \
		echo "CNCF Distribution compile from their Go modules, and the Rust workspace (the controller, the test harness)"; \
		echo "with cargo: about $(FIRST_RUN_MINUTES) minutes on 2 cores in all. Go's and cargo's caches keep it: later runs"; \
		echo "rebuild only what changed."; \
	fi

## deps: the Debian packages the tests need (installed when root, else the apt-get line to run), PyYAML, and
## pymemcache (the sharding bench's client).
deps:
	@missing=(); for tool in $(DEPS); do command -v "$${tool%%:*}" >/dev/null || missing+=("$${tool##*:}"); done; \
	if [ $${#missing[@]} -gt 0 ]; then \
		if [ "$$(id -u)" != 0 ]; then echo "missing packages; run: sudo apt-get install -y $${missing[*]}"; exit 1; fi; \
		echo "installing $${missing[*]}"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -qq && apt-get install -y -qq --no-install-recommends "$${missing[@]}" >/dev/null; \
	fi
	@python3 -c 'import yaml, pymemcache' 2>/dev/null || python3 -m pip install --quiet pyyaml pymemcache

## demo: the policy judging every seed example, then the whole product on a local control plane with a real
## node (Kubewarden 1.35 from its own charts, deploy/policy.yaml active, kubectl apply through its PolicyServer,
## which pulls the policy from a local OCI registry; the controller, live status; a Memcached in real containers
## on the real node; the audit scanner's reports; Prometheus as kube-prometheus-stack runs it showing the product's
## targets up and an alert firing); DEMO_KEEP=1 keeps the cluster.
demo: prereqs deps annotated-policy.wasm
	@echo; echo "== $$(($$(date +%s) - $(MAKE_STARTED))) s in: the policy judging every example of the design documents" \
		"(kwctl run, as policy-server runs it)"
	@hack/demo-verdicts.sh "$(KWCTL)" annotated-policy.wasm e2e-tests/fixtures
	@echo; echo "== The local cluster's pieces, each from its sources (the compilers' output in $(DEMO_LOGS))"
	@STARTED=$(MAKE_STARTED) MAKE="$(MAKE)" hack/build-pieces.sh $(DEMO_LOGS) --beside $(DEMO_BESIDE) $(DEMO_PIECES)
	@echo; echo "== The product on the local cluster"
	$(NETNS) $(TARGET_DIR)/debug/cluster-demo

## bins: the workspace's programs (the controller, the demo's driver) in one debug build with the test features.
bins: | toolchain
	$(CARGO) build --locked -q --workspace --features $(FEATURES) --bins

## target/e2e/local-cluster: the Go control plane (and target/e2e/kubectl), from upstream Kubernetes modules (Go caches the build).
## Kubernetes components report the release they are built from (`kubectl version`, the API server's
## /version, the kubelet's node status), as release builds do.
KUBERNETES_VERSION = $(shell cd e2e-tests/testbed/local-cluster && go list -m -f '{{.Version}}' k8s.io/kubernetes)
VERSION_LDFLAGS = v=$(KUBERNETES_VERSION) && minor=$${v\#v1.} && \
	ldflags="-s -X k8s.io/component-base/version.gitVersion=$$v -X k8s.io/component-base/version.gitMajor=1 \
	-X k8s.io/component-base/version.gitMinor=$${minor%%.*}"
$(E2E_BIN)/local-cluster: $(CLUSTER_SOURCES)
	cd e2e-tests/testbed/local-cluster && $(VERSION_LDFLAGS) && go build -trimpath -ldflags="$$ldflags" -o $(abspath $(E2E_BIN))/ . ./cmd/kubectl

## target/e2e/kubelet: the kubelet of the control plane's release, from the same Go module (it shares the build cache).
$(E2E_BIN)/kubelet: e2e-tests/testbed/local-cluster/cmd/kubelet/main.go e2e-tests/testbed/local-cluster/go.mod e2e-tests/testbed/local-cluster/go.sum
	cd e2e-tests/testbed/local-cluster && $(VERSION_LDFLAGS) && go build -trimpath -ldflags="$$ldflags" -o $(abspath $@) ./cmd/kubelet

## target/e2e/kube-proxy: kube-proxy of the same release and module: Services' ClusterIPs on the real node.
$(E2E_BIN)/kube-proxy: e2e-tests/testbed/local-cluster/cmd/kube-proxy/main.go e2e-tests/testbed/local-cluster/go.mod e2e-tests/testbed/local-cluster/go.sum
	cd e2e-tests/testbed/local-cluster && $(VERSION_LDFLAGS) && go build -trimpath -ldflags="$$ldflags" -o $(abspath $@) ./cmd/kube-proxy

## target/e2e/containerd: the real node's runtime (and its shim), and target/e2e/coredns: the cluster DNS, from their Go
## modules pinned in e2e-tests/testbed/local-cluster/runtime/go.mod (static: no cgo; no devmapper or ZFS snapshotters).
NODE_RUNTIME := e2e-tests/testbed/local-cluster/runtime
CONTAINERD_VERSION = $(shell cd $(NODE_RUNTIME) && go list -m -f '{{.Version}}' github.com/containerd/containerd/v2)
$(E2E_BIN)/containerd: $(NODE_RUNTIME)/go.mod $(NODE_RUNTIME)/go.sum
	cd $(NODE_RUNTIME) && CGO_ENABLED=0 go build -trimpath -tags 'no_devmapper no_zfs' -o $(abspath $(E2E_BIN))/ \
		-ldflags="-s -X github.com/containerd/containerd/v2/version.Version=$(CONTAINERD_VERSION)" \
		github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
$(E2E_BIN)/coredns: $(NODE_RUNTIME)/coredns/main.go $(NODE_RUNTIME)/go.mod $(NODE_RUNTIME)/go.sum
	cd $(NODE_RUNTIME) && CGO_ENABLED=0 go build -trimpath -ldflags=-s -o $(abspath $@) ./coredns

## target/e2e/memcached_exporter: Prometheus's memcached_exporter from its Go module (e2e-tests/testbed/local-cluster/exporter), static.
EXPORTER_MODULE := e2e-tests/testbed/local-cluster/exporter
$(E2E_BIN)/memcached_exporter: $(EXPORTER_MODULE)/go.mod $(EXPORTER_MODULE)/go.sum
	cd $(EXPORTER_MODULE) && v=$$(go list -m -f '{{.Version}}' github.com/prometheus/memcached_exporter) && \
		CGO_ENABLED=0 go build -trimpath -o $(abspath $@) -ldflags="-s -X github.com/prometheus/common/version.Version=$${v#v}" \
		github.com/prometheus/memcached_exporter/cmd/memcached_exporter

## target/e2e/memcached-newest/version: today's memcached as Debian serves it (sid, else trixie), in a root filesystem
## with its own glibc and libraries (target/e2e/memcached-newest/rootfs): apt with a configuration of its own (the host's
## sources and state untouched) fetches and verifies the packages against Debian's archive keyring; the release it got in
## version, the packages in packages. Nothing pinned: run again (delete version) for what Debian serves then.
$(NEWEST_MEMCACHED_DIR)/version: e2e-tests/testbed/local-cluster/images/memcached-newest.sh
	e2e-tests/testbed/local-cluster/images/memcached-newest.sh $(NEWEST_MEMCACHED_DIR)

## target/e2e/images/index.json: the real node's images from Debian's binaries (an OCI layout, umoci): memcached:1.6 today's
## memcached (target/e2e/memcached-newest), memcached:<version> the host's older one, pause, and the exporter's.
$(E2E_BIN)/images/index.json: e2e-tests/testbed/local-cluster/images/images.sh $(E2E_BIN)/memcached_exporter $(NEWEST_MEMCACHED_DIR)/version
	e2e-tests/testbed/local-cluster/images/images.sh $(E2E_BIN)/images $(E2E_BIN)/memcached_exporter $(NEWEST_MEMCACHED_DIR)

## target/e2e/kubewarden/images/index.json: Kubewarden's own images of its release 1.35.0, as its charts run them
## (kubewarden-controller and audit-scanner from its Go module, policy-server from $(POLICY_SERVER)).
$(E2E_BIN)/kubewarden/images/index.json: e2e-tests/testbed/local-cluster/images/kubewarden.sh $(POLICY_SERVER)
	@test -n "$(POLICY_SERVER)" || { echo "policy-server not found: put it on PATH or set POLICY_SERVER"; exit 1; }
	e2e-tests/testbed/local-cluster/images/kubewarden.sh $(E2E_BIN)/kubewarden "$(POLICY_SERVER)"

## target/e2e/prometheus/images/index.json: Prometheus Operator v0.93.1's images (operator, config reloader) and
## Prometheus 3.13.5's (Kubernetes service discovery only) from their Go modules pinned in e2e-tests/testbed/local-cluster/prometheus
## (an OCI layout, umoci), and the operator's CRDs (target/e2e/prometheus/crds.yaml). After containerd and CoreDNS:
## what it shares with them comes from Go's build cache.
PROMETHEUS_MODULE := e2e-tests/testbed/local-cluster/prometheus
$(E2E_BIN)/prometheus/images/index.json: e2e-tests/testbed/local-cluster/images/prometheus.sh $(PROMETHEUS_MODULE)/go.mod $(PROMETHEUS_MODULE)/go.sum \
		| $(E2E_BIN)/containerd $(E2E_BIN)/coredns
	e2e-tests/testbed/local-cluster/images/prometheus.sh $(E2E_BIN)/prometheus

## target/e2e/registry: CNCF Distribution's OCI registry, from its Go module (Go caches the build).
$(E2E_BIN)/registry: $(REGISTRY_SOURCES)
	cd e2e-tests/testbed/registry && go build -trimpath -ldflags=-s -o $(abspath $@) .

## target/tools/cosign: cosign v2 from its Go module, version pinned by e2e-tests/testbed/tools/go.mod (Go caches the build):
## `make push` signs with it. v2, not v3: v3's signing defaults to Sigstore's
## signing config and trust root fetched online through TUF.
$(COSIGN): e2e-tests/testbed/tools/go.mod e2e-tests/testbed/tools/go.sum
	cd e2e-tests/testbed/tools && go build -trimpath -o $(abspath $@) \
		-ldflags="-s -X sigs.k8s.io/release-utils/version.gitVersion=$$(go list -m -f '{{.Version}}' github.com/sigstore/cosign/v2)" \
		github.com/sigstore/cosign/v2/cmd/cosign

## push: kwctl push of annotated-policy.wasm as registry://$(REGISTRY)/policies/memcached:v<version>, then cosign
## (v2, target/tools/cosign) signs the digest kwctl reports with COSIGN_KEY, offline: no transparency log upload
## (`make push REGISTRY=ghcr.io/c5c3 COSIGN_KEY=cosign.key`; the key's password in COSIGN_PASSWORD; version from
## metadata.yml; credentials from ~/.docker/config.json, as `docker login` writes them). Without COSIGN_KEY it
## refuses unless SIGN=no; SOURCES_PATH passes kwctl's sources.yml (insecure registries). deploy/push-policy.sh.
REGISTRY ?=
COSIGN_KEY ?=
SIGN ?=
SOURCES_PATH ?=
POLICY_VERSION = $(shell sed -n 's/^ *io.kubewarden.policy.version: *//p' metadata.yml)
push: annotated-policy.wasm $(if $(COSIGN_KEY),$(COSIGN))
	@test -n "$(REGISTRY)" || { echo "usage: make push REGISTRY=<host>[/<namespace>] COSIGN_KEY=<cosign.key> (e.g. ghcr.io/c5c3)"; exit 1; }
	@test -n "$(POLICY_VERSION)" || { echo "metadata.yml has no io.kubewarden.policy.version"; exit 1; }
	KWCTL="$(KWCTL)" COSIGN="$(abspath $(COSIGN))" COSIGN_KEY="$(COSIGN_KEY)" SIGN="$(SIGN)" SOURCES_PATH="$(SOURCES_PATH)" \
		deploy/push-policy.sh annotated-policy.wasm registry://$(REGISTRY)/policies/memcached:v$(POLICY_VERSION)

## push-chart: helm package of deploy/helm/memcached-operator, helm push as oci://$(REGISTRY)/charts/memcached-operator:<chart
## version>, then cosign (v2, target/tools/cosign) signs the digest helm reports with COSIGN_KEY, offline: no transparency
## log upload (`make push-chart REGISTRY=ghcr.io/c5c3 COSIGN_KEY=cosign.key`; the key's password in COSIGN_PASSWORD;
## credentials from `helm registry login` and ~/.docker/config.json). Without COSIGN_KEY it refuses unless SIGN=no;
## PLAIN_HTTP=yes for a registry without TLS. deploy/helm/push-chart.sh.
PLAIN_HTTP ?=
push-chart: $(HELM) $(if $(COSIGN_KEY),$(COSIGN))
	@test -n "$(REGISTRY)" || { echo "usage: make push-chart REGISTRY=<host>[/<namespace>] COSIGN_KEY=<cosign.key> (e.g. ghcr.io/c5c3)"; exit 1; }
	HELM="$(abspath $(HELM))" COSIGN="$(abspath $(COSIGN))" COSIGN_KEY="$(COSIGN_KEY)" SIGN="$(SIGN)" PLAIN_HTTP="$(PLAIN_HTTP)" \
		deploy/helm/push-chart.sh $(CHART) oci://$(REGISTRY)/charts

## image: the controller's OCI image from the release build, without a Docker daemon (deploy/image.sh, umoci):
## non-root (65532), no shell, runs on a read-only root filesystem; the layout is target/image, tag v<version>.
CONTROLLER_VERSION = $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
IMAGE_LAYOUT := target/image
image: deps
	$(CARGO) build --locked --release -p memcached-controller
	deploy/image.sh $(TARGET_DIR)/release/memcached-controller $(IMAGE_LAYOUT) v$(CONTROLLER_VERSION)

## push-image: skopeo copy of the image to $(IMAGE):v<version> (`make push-image IMAGE=ghcr.io/c5c3/memcached-operator`;
## credentials from ~/.docker/config.json or `skopeo login`).
IMAGE ?=
push-image: image
	@test -n "$(IMAGE)" || { echo "usage: make push-image IMAGE=<registry>/<name> (e.g. ghcr.io/c5c3/memcached-operator)"; exit 1; }
	skopeo copy oci:$(IMAGE_LAYOUT):v$(CONTROLLER_VERSION) docker://$(IMAGE):v$(CONTROLLER_VERSION)

## release: every asset of the GitHub release v<version> in target/release-assets/ (deploy/release.sh): policy.wasm,
## annotated-policy.wasm, the chart archive (helm package), crd.yaml, cosign.pub and SHA256SUMS, the files the docs and
## artifacthub-pkg.yml link (`make release COSIGN_KEY=cosign.key`: cosign.pub is its public half, the password in
## COSIGN_PASSWORD; or COSIGN_PUB=cosign.pub). Without either it refuses. Uploading them is manual (docs/development/release.md).
COSIGN_PUB ?=
RELEASE_ASSETS := target/release-assets
.PHONY: release
release: policy.wasm annotated-policy.wasm $(HELM) $(if $(COSIGN_KEY),$(COSIGN))
	HELM="$(abspath $(HELM))" COSIGN="$(abspath $(COSIGN))" COSIGN_KEY="$(COSIGN_KEY)" COSIGN_PUB="$(COSIGN_PUB)" \
		deploy/release.sh $(RELEASE_ASSETS)

## target/tools/helm: helm from its Go module, version pinned by e2e-tests/testbed/tools/go.mod (Go caches the build).
$(HELM): e2e-tests/testbed/tools/go.mod e2e-tests/testbed/tools/go.sum
	cd e2e-tests/testbed/tools && go build -trimpath -o $(abspath $@) \
		-ldflags="-s -X helm.sh/helm/v3/internal/version.version=$$(go list -m -f '{{.Version}}' helm.sh/helm/v3)" \
		helm.sh/helm/v3/cmd/helm

## helm-test: helm lint (default values and ci/all-values.yaml), then helm template checked against deploy/
## (the controller's rules are deploy/rbac.yaml's, the templated CRD is deploy/crd.yaml, every option lands).
helm-test: $(HELM)
	$(HELM) lint --strict $(CHART) 2> >(grep -v 'found symbolic link' >&2)
	$(HELM) lint --strict $(CHART) -f $(CHART)/ci/all-values.yaml 2> >(grep -v 'found symbolic link' >&2)
	python3 deploy/helm/check_chart.py $(HELM) 2> >(grep -v 'found symbolic link' >&2)

## prometheus-test: promtool checks the alerts and the Grafana dashboard's queries, and unit-tests the alerts; every
## alert links its section of docs/operating/alerts.md (runbook_url) and none is named as a memcached mixin alert.
prometheus-test:
	@rm -rf "$(TMPDIR_OR_TMP)/prometheus-test"
	python3 deploy/prometheus/promtool_inputs.py "$(TMPDIR_OR_TMP)/prometheus-test"
	promtool check rules "$(TMPDIR_OR_TMP)"/prometheus-test/*.rules.yaml
	cp deploy/prometheus/memcached-operator-rules.test.yaml "$(TMPDIR_OR_TMP)/prometheus-test/"
	cd "$(TMPDIR_OR_TMP)/prometheus-test" && promtool test rules memcached-operator-rules.test.yaml

## test: lint, then every test from one build of the workspace (`cargo test --workspace --features $(FEATURES)`):
## unit tests, the policy through wasmtime, the controller against real memcached, the end-to-end suites on a real
## control plane (each enters its own network namespace; admission through policy-server) and on two real nodes, then
## the prerequisites check and `make toolchain` against the machines and rustup states users have, the policy on
## kwctl, the Helm chart with helm and the alerts with promtool (hack/test.sh). The real node's suite and lint run beside
## the others (the suites mostly wait on their clusters); each suite's output is in $(TEST_LOGS), shown when it fails, and a table
## of each phase's time ends it. No incremental state for the one big build (CARGO_INCREMENTAL=1 to keep it): it
## only costs disk on a cold run.
TEST_LOGS := $(TARGET_DIR)/test-logs
test: prereqs deps policy.wasm annotated-policy.wasm $(CLUSTER_PIECES) $(COSIGN) $(NODE_PIECES)
	@CARGO_INCREMENTAL=$(or $(CARGO_INCREMENTAL),0) CARGO="$(CARGO)" MAKE="$(MAKE)" hack/test.sh $(TEST_LOGS) $(FEATURES)

## unit-tests: the tests that need no control plane (policy.wasm and memcached are still used; a plain
## `cargo test` runs only those that need neither).
unit-tests: deps policy.wasm $(NEWEST_MEMCACHED_DIR)/version
	$(CARGO) test --locked --workspace --features e2e-tests/external-tools,memcached-controller/external-tools
	python3 e2e-tests/testbed/check_metadata.py
	python3 e2e-tests/testbed/check_release_links.py

## kwctl-tests: the policy on Kubewarden's kwctl (e2e-tests/testbed/e2e.bats): fixtures, settings, deploy/ manifests, packaging;
## and the signed artifact (e2e-tests/testbed/signing.bats): kwctl verify and policy-server accept the release key only.
kwctl-tests: annotated-policy.wasm $(E2E_BIN)/registry $(COSIGN)
	bats e2e-tests/testbed/e2e.bats e2e-tests/testbed/signing.bats

## e2e: the end-to-end suites alone: tests/cluster/ (the product), tests/controller/ (the controller on the API
## server's semantics), tests/manifests/ (deploy/ and the chart, server-side dry-run), same build as `make test`.
## The suites run target/debug/memcached-controller, which `--test` alone would not rebuild: the bins come first.
e2e: policy.wasm annotated-policy.wasm $(CLUSTER_PIECES)
	$(CARGO) build --locked -q --workspace --features $(FEATURES) --bins
	$(CARGO) test --locked --workspace --features $(FEATURES) --test cluster --test controller --test manifests

## e2e-node: the real node alone (tests/node/, part of `make test`): two control planes at once, each with a real
## node (kubelet, containerd, kube-proxy and CoreDNS) beside its kwok nodes; on the first, Kubewarden from its own charts judging the suite's Memcacheds, its audit scanner, a
## PolicyServer requiring the release key; Memcacheds' pods and the chart's controller in real containers pulled
## from the local registry.
e2e-node: deps policy.wasm annotated-policy.wasm $(CLUSTER_PIECES) $(COSIGN) $(NODE_PIECES)
	$(CARGO) build --locked -q --workspace --features $(FEATURES) --bins
	$(CARGO) test --locked --workspace --features $(FEATURES) --test node

## e2e-tests: the fixtures through the built policy (waPC host on wasmtime, and kwctl).
e2e-tests: policy.wasm kwctl-tests
	$(CARGO) test --locked -p e2e-tests --features external-tools

## bench: policy size and latency (wasm against native), the worst request under 3 MiB against the full-featured CR;
## controller binary size and stats collection.
bench: policy.wasm
	$(CARGO) build --locked --release -p memcached-controller
	@echo "controller release binary: $$(stat -c %s $(TARGET_DIR)/release/memcached-controller) bytes"
	$(CARGO) bench --locked -p e2e-tests --bench latency
	$(CARGO) bench --locked -p e2e-tests --bench worst_case
	$(CARGO) bench --locked -p memcached-controller --bench stats

## bench-kwctl: kwctl bench of annotated-policy.wasm on the full-featured CR (mutating, and judging only)
## interleaved with Kubewarden's template policy and its mutating capabilities-psp and psa-label-enforcer
## policies on their own requests (../shared/bench): medians and ratios, last ours / capabilities-psp
## (ROUNDS=n repeats).
BENCH_REFERENCE := $(abspath ../shared/bench)
BENCH_REQUEST := e2e-tests/fixtures/requests/seed-valid-cr-with-all-features-v1beta1.json
ROUNDS ?= 1
bench-kwctl: annotated-policy.wasm
	python3 e2e-tests/testbed/kwctl_bench.py "$(KWCTL)" $(ROUNDS) annotated-policy.wasm $(BENCH_REQUEST) $(BENCH_REFERENCE)

## bench-guest: the policies' own `validate` timed inside wasmtime as policy-server 1.35 configures it (epoch
## deadline and ticker, waPC `__guest_call`, host callbacks timed and taken out): ours on the full-featured CR,
## Kubewarden's capabilities-psp and psa-label-enforcer on their own requests and settings (../shared/bench), on
## a warm instance (as kwctl bench) and on a fresh instance per request (as policy-server); medians and ratios,
## last ours / capabilities-psp, warm (benches/guest.rs; ROUNDS=n rounds, 5 unless given).
bench-guest: policy.wasm
	BENCH_REFERENCE=$(BENCH_REFERENCE) $(CARGO) bench --locked -p e2e-tests --bench guest

## bench-rollout: on the real node (as e2e-node), 3 warm-restart replicas and 20,000 keys through the
## HashClient of pymemcache: the keys an image change keeps (applied in place), the worst read-through pass during a config
## change that needs new pods, and the pods a controller upgrade restarts (benches/rollout.rs). It counts keys and
## pods, not time, so it runs the test build of `make e2e-node` (no release build).
bench-rollout: deps policy.wasm annotated-policy.wasm $(CLUSTER_PIECES) $(NODE_PIECES)
	$(CARGO) build --locked -q -p memcached-controller
	$(CARGO) test --locked -q -p e2e-tests --features cluster,real-node --bench rollout

## bench-kubewarden: on the real node (as e2e-node), Kubewarden from its own charts: kubectl apply -> active,
## admission latency seen by kube-apiserver through the suite's policy-server process and through the PolicyServer
## pod (idle, and 200 CRs at once), and the audit scanner over them (benches/kubewarden.rs).
bench-kubewarden: deps policy.wasm annotated-policy.wasm $(CLUSTER_PIECES) $(NODE_PIECES)
	$(CARGO) build --locked -q -p memcached-controller
	$(CARGO) test --locked -q -p e2e-tests --features cluster,real-node --bench kubewarden

## bench-moves: on the real node (as e2e-node), where pods run their preStop hooks, a StatefulSet and a Deployment
## whose clients' hashing is known (clientHashing), 20,000 keys: the worst pass of pymemcache's HashClient while each
## move hands the keys over (scale 3 -> 4 and 4 -> 3, a deleted pod, a drain's eviction, maxMemoryMB 64 -> 128), a
## line of moves per mode (benches/moves.rs).
bench-moves: deps policy.wasm annotated-policy.wasm $(CLUSTER_PIECES) $(NODE_PIECES)
	$(CARGO) build --locked -q -p memcached-controller
	$(CARGO) test --locked -q -p e2e-tests --features cluster,real-node --bench moves

## bench-e2e: control-plane start, apply -> Ready, admission latency through policy-server seen by kube-apiserver,
## 200 CRs at once; then the keys pymemcache's HashClient still finds after scaling, a pod deletion and a rollout,
## Deployment against StatefulSet mode; API requests per converged reconcile and controller RSS at 200 and
## 1,000 Memcacheds (release controller); then bench-rollout, bench-kubewarden and bench-moves on the real node.
bench-e2e: deps policy.wasm annotated-policy.wasm $(CLUSTER_PIECES) $(NODE_PIECES)
	$(CARGO) build --locked --release -p memcached-controller
	$(CARGO) bench --locked --no-run -p e2e-tests --features cluster --bench cluster --bench sharding --bench controller
	MEMCACHED_CONTROLLER=$(TARGET_DIR)/release/memcached-controller $(NETNS) $(CARGO) bench --locked --offline -q -p e2e-tests --features cluster --bench cluster
	MEMCACHED_CONTROLLER=$(TARGET_DIR)/release/memcached-controller $(NETNS) $(CARGO) bench --locked --offline -q -p e2e-tests --features cluster --bench sharding
	MEMCACHED_CONTROLLER=$(TARGET_DIR)/release/memcached-controller $(NETNS) $(CARGO) bench --locked --offline -q -p e2e-tests --features cluster --bench controller
	$(MAKE) --no-print-directory bench-rollout bench-kubewarden bench-moves

## bench-big-cache: a cache of 1 GiB (values of 1 KiB to 100 KiB) scaled 3 -> 4, its keys handed over: the new
## pod's time to Ready and to status.serverList, the controller's copy (its Event), the keys and bytes served after
## (release controller; benches/big_cache.rs).
bench-big-cache: deps policy.wasm annotated-policy.wasm $(CLUSTER_PIECES)
	$(CARGO) build --locked --release -p memcached-controller
	$(CARGO) bench --locked --no-run -p e2e-tests --features cluster --bench big_cache
	MEMCACHED_CONTROLLER=$(TARGET_DIR)/release/memcached-controller $(NETNS) $(CARGO) bench --locked --offline -q -p e2e-tests --features cluster --bench big_cache

## crd: regenerate deploy/crd.yaml from the API types, and the Memcached reference (docs/reference) from it; and the
## docs' lines that state the memcached option table's defaults and bounds (policy-wasm/README.md, README.md;
## api/tests/option_docs.rs).
crd:
	$(CARGO) run --locked -q -p memcached-controller -- crd > deploy/crd.yaml
	python3 hack/crd_reference.py
	UPDATE_DOCS=1 $(CARGO) test --locked -q -p memcached-api --test option_docs

## fixtures: regenerate e2e-tests/fixtures from the seed documents it keeps (e2e-tests/fixtures/seeds).
fixtures:
	cd e2e-tests/fixtures && python3 generate.py

## lint: the Makefile itself (no variable used before its definition, every documented target real:
## hack/check-makefile.sh), the docs (the generated Memcached reference current, every link and
## anchor resolving; hack/check-docs.sh), rustfmt, clippy with -D warnings (the workspace's lints, Cargo.toml) on every target and on the wasm
## policy, gofmt and go vet of the Go control plane (-trimpath as it is built: vet reuses the build's compiled packages).
lint: | toolchain
	hack/check-makefile.sh
	hack/check-docs.sh
	$(CARGO) fmt --all --check
	$(CARGO) clippy --locked --workspace --all-targets --features $(FEATURES) -- -D warnings
	$(CARGO) clippy --locked --target $(WASM_TARGET) -p memcached-policy -- -D warnings
	cd e2e-tests/testbed/local-cluster && test -z "$$(gofmt -l .)" && go vet -trimpath ./...

## fmt: format the Rust code.
fmt:
	$(CARGO) fmt --all

## clean: remove cargo's target directory and the built policies.
clean:
	$(CARGO) clean
	rm -f policy.wasm annotated-policy.wasm
