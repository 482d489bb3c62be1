#!/usr/bin/env bash
# Kubewarden's images, built here as its Dockerfiles build them (nothing
# pulled): usage: kubewarden.sh <out dir> <policy-server binary>
#   kubewarden-controller, audit-scanner  static Go binaries from the module
#       github.com/kubewarden/kubewarden-controller at KUBEWARDEN_VERSION.
#       The module proxy serves that version's zip but neither its .info nor
#       its .mod, and the checksum database does not know it, so `go install`
#       cannot fetch it: the zip is fetched from the first proxy of
#       `go env GOPROXY`, checked against KUBEWARDEN_ZIP_SHA256 (pinned here
#       in place of the checksum database) and built as a module copy (its
#       go.mod replaces cel-go, which `go install pkg@version` refuses).
#   policy-server  the given binary (Kubewarden's own build of the same
#       release: refused if it says another version) with the libraries it
#       links, user 65533, as upstream's image.
# Into <out dir>/images, an OCI layout (umoci) with the tags
# kubewarden-controller, audit-scanner and policy-server.
set -euo pipefail
out=${1:?usage: kubewarden.sh <out dir> <policy-server binary>}
policy_server=${2:?usage: kubewarden.sh <out dir> <policy-server binary> (set POLICY_SERVER)}
# The release: the charts in ../shared/kubewarden, kubewarden_charts.rs's
# VERSION and the images' tags name the same one.
KUBEWARDEN_VERSION=v1.35.0
KUBEWARDEN_ZIP_SHA256=4d6daf6642a71d4ed0eb5a190bed787e6f5f4c3ca61f995bd7fcda7ec547e2ca
module=github.com/kubewarden/kubewarden-controller
version=$("$policy_server" --version 2>/dev/null | sed -n '1s/^policy-server //p')
[ "v${version#v}" = "$KUBEWARDEN_VERSION" ] || {
	echo "$policy_server is policy-server ${version:-of no known version}, not $KUBEWARDEN_VERSION" >&2
	exit 1
}
mkdir -p "$out"
out=$(cd "$out" && pwd)

zip=$out/kubewarden-controller-$KUBEWARDEN_VERSION.zip
if ! echo "$KUBEWARDEN_ZIP_SHA256  $zip" | sha256sum --check --status 2>/dev/null; then
	proxy=$(go env GOPROXY | cut -d, -f1 | cut -d'|' -f1)
	case $proxy in http*) ;; *)
		echo "GOPROXY's first entry ($proxy) is no module proxy: cannot fetch $module@$KUBEWARDEN_VERSION" >&2
		exit 1
		;;
	esac
	curl --fail --silent --show-error --location -o "$zip.part" "$proxy/$module/@v/$KUBEWARDEN_VERSION.zip"
	echo "$KUBEWARDEN_ZIP_SHA256  $zip.part" | sha256sum --check --quiet
	mv "$zip.part" "$zip"
fi
src=$out/src
rm -rf "$src"
mkdir -p "$src"
unzip -q "$zip" -d "$src"
src=$src/$module@$KUBEWARDEN_VERSION
chmod -R u+w "$src"
(cd "$src" && GONOSUMDB=$module CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$out/bin/" ./cmd/controller ./cmd/audit-scanner)

layout=$out/images
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$layout"
umoci init --layout "$layout"

# image TAG BINARY UID: an image running /BINARY's basename as UID (also its
# group), written to /etc/passwd and /etc/group as TAG, with /tmp and the
# system's CA certificates (policy-server refuses to start without any), as
# the distroless base of upstream's images has; BINARY's libraries, if it
# links any, at their paths.
image() {
	local tag=$1 binary=$2 uid=$3
	umoci new --image "$layout:$tag"
	umoci unpack --image "$layout:$tag" "$work/$tag" >/dev/null
	local rootfs=$work/$tag/rootfs entrypoint=/${binary##*/} lib
	install -D -m 0755 "$binary" "$rootfs$entrypoint"
	for lib in $(ldd "$binary" 2>/dev/null | grep -o '/[^ ]*' || true); do
		install -D -m "$(stat -L -c %a "$lib")" "$lib" "$rootfs$lib"
	done
	install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
	mkdir -p "$rootfs/tmp"
	chmod 1777 "$rootfs/tmp"
	printf 'root:x:0:0:root:/root:/sbin/nologin\n%s:x:%s:%s::/tmp:/sbin/nologin\n' "$tag" "$uid" "$uid" >"$rootfs/etc/passwd"
	printf 'root:x:0:\n%s:x:%s:\n' "$tag" "$uid" >"$rootfs/etc/group"
	umoci repack --image "$layout:$tag" "$work/$tag"
	umoci config --image "$layout:$tag" --os linux --architecture amd64 --config.user "$uid:$uid" \
		--config.entrypoint "$entrypoint" --config.label "org.opencontainers.image.version=$KUBEWARDEN_VERSION"
}

image kubewarden-controller "$out/bin/controller" 65532
image audit-scanner "$out/bin/audit-scanner" 65532
image policy-server "$policy_server" 65533
umoci gc --layout "$layout"
echo "$layout: kubewarden-controller, audit-scanner, policy-server ($KUBEWARDEN_VERSION)"
