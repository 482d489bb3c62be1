#!/usr/bin/env bash
# The controller's image, as an OCI layout, without a Docker daemon (umoci):
#   image.sh <controller binary> <layout dir> <tag>
# What the Dockerfile builds on distroless: the binary at /memcached-controller
# with the shared libraries it links (from this machine, as `ldd` lists them),
# an /etc/passwd naming the nonroot user 65532, nothing else (no shell), run as
# 65532:65532 with `run --leader-election`. It runs on a read-only root
# filesystem: it writes nothing to disk. Push it with
#   skopeo copy oci:<layout dir>:<tag> docker://<registry>/<name>:<tag>
set -euo pipefail
binary=${1:?usage: image.sh <controller binary> <layout dir> <tag>}
layout=${2:?usage: image.sh <controller binary> <layout dir> <tag>}
tag=${3:?usage: image.sh <controller binary> <layout dir> <tag>}
version=$("$binary" --version | awk '{print $NF}')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

[ -d "$layout" ] || umoci init --layout "$layout"
umoci rm --image "$layout:$tag" 2>/dev/null || true
umoci new --image "$layout:$tag"
umoci unpack --image "$layout:$tag" "$work/bundle"
rootfs=$work/bundle/rootfs
install -D -m 0755 "$binary" "$rootfs/memcached-controller"
# The dynamic loader and libraries, each at its own path (symlinks followed).
for library in $(ldd "$binary" | grep -o '/[^ ]*'); do
	install -D -m 0755 "$(readlink -f "$library")" "$rootfs$library"
done
mkdir -p "$rootfs/etc" "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$rootfs/etc/group"
umoci repack --image "$layout:$tag" "$work/bundle"
umoci config --image "$layout:$tag" --os linux --architecture amd64 \
	--config.user 65532:65532 --config.entrypoint /memcached-controller \
	--config.cmd run --config.cmd --leader-election \
	--config.exposedports 8080/tcp --config.exposedports 8081/tcp \
	--config.label "org.opencontainers.image.title=memcached-operator" \
	--config.label "org.opencontainers.image.version=$version" \
	--config.label "org.opencontainers.image.source=https://github.com/c5c3/memcached-operator"
umoci gc --layout "$layout"
echo "$layout:$tag: memcached-operator $version, $(du -sh "$rootfs" | cut -f1) unpacked"
