#!/usr/bin/env bash
# Prometheus Operator's and Prometheus's images, built here as their
# Dockerfiles build them (nothing pulled): usage: prometheus.sh <out dir>
#   prometheus-operator, prometheus-config-reloader  static Go binaries from
#       the module github.com/prometheus-operator/prometheus-operator.
#   prometheus  the static Prometheus server from github.com/prometheus/prometheus
#       (v0.3XX.Y is Prometheus 3.XX.Y), with Kubernetes service discovery
#       only (build tags remove_all_sd, enable_kubernetes_sd; file and HTTP
#       SD are always in) and without the embedded web UI (no builtinassets
#       tag: the module has no built UI). The HTTP API is whole.
# The versions are pinned by prometheus/go.mod and every module zip's hash
# by its go.sum (h1: SHA-256 over the zip's files, checked by go when it
# fetches the zip from GOPROXY). `go install` refuses both releases (replace
# and exclude directives in their go.mod files); as that module's
# dependencies they build, their directives ignored. That module also
# raises the shared dependencies (k8s.io/client-go, api, apimachinery, gRPC,
# OpenTelemetry, x/net, ...) to the versions the runtime module (containerd,
# CoreDNS) builds, and the build uses its flags (CGO_ENABLED=0, -trimpath):
# the packages both compile come from Go's build cache. The three binaries
# are one `go build`.
# Into <out dir>/images, an OCI layout (umoci) with the tags
# prometheus-operator, prometheus-config-reloader and prometheus; into
# <out dir>/crds.yaml, the operator's CRDs (`operator crds`: apply them
# server-side, they are too large for kubectl's last-applied annotation).
set -euo pipefail
out=${1:?usage: prometheus.sh <out dir>}
module_dir=$(cd "$(dirname "$0")/../prometheus" && pwd)
operator_module=github.com/prometheus-operator/prometheus-operator
prometheus_module=github.com/prometheus/prometheus
mkdir -p "$out"
out=$(cd "$out" && pwd)

cd "$module_dir"
# The build cache holds what the runtime module compiled at its versions only:
# name the modules both require at different versions (compiled again).
requires() { go mod edit -json "$1" | jq -r '.Require[] | "\(.Path) \(.Version)"' | LC_ALL=C sort; }
drift=$(LC_ALL=C join <(requires go.mod) <(requires ../runtime/go.mod) | awk '$2 != $3 { print "  " $1 " " $2 " (runtime: " $3 ")" }')
[ -z "$drift" ] || printf 'prometheus.sh: not at ../runtime/go.mod'"'"'s versions, so not shared with its build:\n%s\n' "$drift" >&2
# The releases, as their images report them (each module's VERSION file).
operator_dir=$(go mod download -json "$operator_module" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
prometheus_dir=$(go mod download -json "$prometheus_module" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
operator_version=$(cat "$operator_dir/VERSION")
prometheus_version=$(cat "$prometheus_dir/VERSION")
version=github.com/prometheus/common/version
rm -rf "$out/bin"
CGO_ENABLED=0 go build -trimpath -tags 'remove_all_sd enable_kubernetes_sd' \
	-ldflags="$operator_module/cmd/...=-s -w -X $version.Version=$operator_version -X $version.Branch=v$operator_version" \
	-ldflags="$prometheus_module/cmd/prometheus=-s -w -X $version.Version=$prometheus_version -X $version.Branch=HEAD" \
	-o "$out/bin/" "$operator_module/cmd/operator" "$operator_module/cmd/prometheus-config-reloader" \
	"$prometheus_module/cmd/prometheus"
"$out/bin/operator" crds >"$out/crds.yaml"

layout=$out/images
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$layout"
umoci init --layout "$layout"

# image TAG BINARY: a new image TAG with BINARY at /bin/, /etc/passwd and
# /etc/group (nobody is 65534, as on the busybox base of upstream's images),
# /tmp and the system's CA certificates, in $work/TAG/rootfs until finish.
image() {
	local tag=$1 binary=$2
	umoci new --image "$layout:$tag"
	umoci unpack --image "$layout:$tag" "$work/$tag" >/dev/null
	local rootfs=$work/$tag/rootfs
	install -D -m 0755 "$binary" "$rootfs/bin/${binary##*/}"
	install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
	mkdir -p "$rootfs/tmp"
	chmod 1777 "$rootfs/tmp"
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/home:/sbin/nologin\n' >"$rootfs/etc/passwd"
	printf 'root:x:0:\nnobody:x:65534:\n' >"$rootfs/etc/group"
}
# finish TAG BINARY VERSION CONFIG...: pack it, running /bin/BINARY's
# basename as nobody; CONFIG are further umoci config flags.
finish() {
	local tag=$1 binary=$2 version=$3
	shift 3
	umoci repack --image "$layout:$tag" "$work/$tag"
	umoci config --image "$layout:$tag" --os linux --architecture amd64 --config.user 65534:65534 \
		--config.entrypoint "/bin/${binary##*/}" --config.label "org.opencontainers.image.version=$version" "$@"
}

image prometheus-operator "$out/bin/operator"
finish prometheus-operator "$out/bin/operator" "v$operator_version" --config.exposedports 8080/tcp
image prometheus-config-reloader "$out/bin/prometheus-config-reloader"
finish prometheus-config-reloader "$out/bin/prometheus-config-reloader" "v$operator_version"

# Prometheus's image as its Dockerfile makes it: the example configuration,
# /prometheus (the TSDB, writable by nobody and its group) as the working
# directory and a volume, the default arguments; promtool is left out
# (the operator never runs it).
image prometheus "$out/bin/prometheus"
rootfs=$work/prometheus/rootfs
install -D -m 0644 "$prometheus_dir/documentation/examples/prometheus.yml" "$rootfs/etc/prometheus/prometheus.yml"
install -m 0644 "$prometheus_dir/LICENSE" "$prometheus_dir/NOTICE" "$rootfs/"
mkdir -p "$rootfs/prometheus"
chown -R 65534:65534 "$rootfs/etc/prometheus" "$rootfs/prometheus"
chmod 0775 "$rootfs/prometheus"
finish prometheus "$out/bin/prometheus" "v$prometheus_version" --config.workingdir /prometheus \
	--config.volume /prometheus --config.exposedports 9090/tcp \
	--config.cmd --config.file=/etc/prometheus/prometheus.yml --config.cmd --storage.tsdb.path=/prometheus

umoci gc --layout "$layout"
echo "$layout: prometheus-operator, prometheus-config-reloader (v$operator_version), prometheus (v$prometheus_version); $out/crds.yaml"
