#!/usr/bin/env bash
# Build the real node's images from Debian's binaries, nothing pulled, into
# one OCI layout (umoci): usage: images.sh <layout dir> <memcached_exporter> <memcached-newest dir>
#   memcached       today's memcached as Debian serves it (sid, else trixie: the
#                   root filesystem memcached-newest.sh extracted, memcached and
#                   the libraries it links, its own glibc), as the official
#                   memcached:1.6 runs it: user memcache (11211),
#                   docker-entrypoint.sh prepending `memcached` to args that
#                   start with "-", busybox's sh and sleep (preStop hooks).
#   memcached-previous  the host's memcached (Debian 12's 1.6.18) with the
#                   host's libraries it links, run the same way: an older
#                   release users still run, to upgrade from.
#                   Both are tagged memcached-<version> too, and labelled with
#                   it (org.opencontainers.image.version).
#   memcached-exporter  the static memcached_exporter built from its Go
#                   module, as prom/memcached-exporter runs it: user nobody,
#                   /bin/memcached_exporter as the entrypoint, port 9150.
#   pause:catatonit catatonit -P, the pod sandbox (node-containerd.toml).
#   faulty-memcached-garbage-stats, -resets-connections  busybox nc on port
#                   11211 (a TCP probe passes), whatever the args: it answers
#                   `stats` with a number that is not one, or closes each
#                   connection with the command unread (the kernel resets it).
# The suite pushes them to its local registry (skopeo), which containerd
# mirrors docker.io and registry.k8s.io from.
set -euo pipefail
usage='usage: images.sh <layout dir> <memcached_exporter> <memcached-newest dir>'
layout=${1:?$usage}
exporter=${2:?$usage}
newest=${3:?$usage}
[ -s "$newest/version" ] || { echo "$newest/version missing (make target/e2e/memcached-newest/version)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$layout"
umoci init --layout "$layout"

# image TAG: a new image TAG whose root filesystem is $work/TAG/rootfs.
image() {
	umoci new --image "$layout:$1"
	umoci unpack --image "$layout:$1" "$work/$1"
}

# copy ROOTFS FILE...: each file (symlinks followed) at its own path.
copy() {
	local rootfs=$1 file
	shift
	for file in "$@"; do
		install -D -m "$(stat -L -c %a "$file")" "$file" "$rootfs$file"
	done
}

# finish TAG ARGS...: pack the root filesystem and set the config.
finish() {
	local tag=$1
	shift
	umoci repack --image "$layout:$tag" "$work/$tag"
	umoci config --image "$layout:$tag" --os linux --architecture amd64 "$@"
}

# memcached_image TAG VERSION: finish TAG's root filesystem, which has memcached on PATH, to run as
# the official image does; label it with VERSION and tag it memcached-VERSION too.
memcached_image() {
	local tag=$1 version=$2 rootfs=$work/$1/rootfs
	install -D -m 0755 "$(command -v busybox)" "$rootfs/bin/busybox"
	ln -s busybox "$rootfs/bin/sh"
	ln -s busybox "$rootfs/bin/sleep"
	mkdir -p "$rootfs/etc" "$rootfs/usr/local/bin" "$rootfs/tmp"
	chmod 1777 "$rootfs/tmp"
	printf 'root:x:0:0:root:/root:/bin/sh\nmemcache:x:11211:11211:memcache:/home/memcache:/bin/sh\n' >"$rootfs/etc/passwd"
	printf 'root:x:0:\nmemcache:x:11211:\n' >"$rootfs/etc/group"
	cat >"$rootfs/usr/local/bin/docker-entrypoint.sh" <<'EOF'
#!/bin/sh
set -e
# first arg is `-f` or `--some-option`
if [ "${1#-}" != "$1" ]; then
	set -- memcached "$@"
fi
exec "$@"
EOF
	chmod 0755 "$rootfs/usr/local/bin/docker-entrypoint.sh"
	finish "$tag" --config.user 11211:11211 --config.entrypoint docker-entrypoint.sh --config.cmd memcached \
		--config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--config.exposedports 11211/tcp --config.label "org.opencontainers.image.version=$version"
	umoci tag --image "$layout:$tag" "memcached-$version"
}

# Today's: the root filesystem memcached-newest.sh extracted (merged /usr: /bin is a link to usr/bin).
version=$(cat "$newest/version")
image memcached
cp -a "$newest/rootfs/." "$work/memcached/rootfs/"
memcached_image memcached "$version"

# The previous release: the host's memcached and the host's libraries it links.
memcached=$(command -v memcached)
previous=$("$memcached" -V | cut -d' ' -f2)
if [ "$previous" = "$version" ]; then
	echo "the host's memcached is $previous, the newest too: no older release to keep (a Debian 12 host has 1.6.18)"
	exit 1
fi
image memcached-previous
copy "$work/memcached-previous/rootfs" "$memcached" $(ldd "$memcached" | grep -o '/[^ ]*')
memcached_image memcached-previous "$previous"

exporter_version=$("$exporter" --version 2>&1 | sed -n 's/.*version \([^ ]*\) .*/\1/p')
image memcached-exporter
rootfs=$work/memcached-exporter/rootfs
install -D -m 0755 "$exporter" "$rootfs/bin/memcached_exporter"
mkdir -p "$rootfs/etc"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/home:/sbin/nologin\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nnobody:x:65534:\n' >"$rootfs/etc/group"
finish memcached-exporter --config.user 65534:65534 --config.entrypoint /bin/memcached_exporter \
	--config.exposedports 9150/tcp --config.label "org.opencontainers.image.version=$exporter_version"

image pause
copy "$work/pause/rootfs" "$(command -v catatonit)"
finish pause --config.user 65535:65535 --config.entrypoint "$(command -v catatonit)" --config.entrypoint -P

image faulty-memcached
rootfs=$work/faulty-memcached/rootfs
install -D -m 0755 "$(command -v busybox)" "$rootfs/bin/busybox"
for applet in sh nc sleep; do ln -s busybox "$rootfs/bin/$applet"; done
cat >"$rootfs/bin/garbage-stats" <<'SH'
#!/bin/sh
read -r _
printf 'STAT pid 1\r\nSTAT curr_items many\r\nEND\r\n'
SH
printf '#!/bin/sh\nsleep 1\n' >"$rootfs/bin/resets-connections"
chmod 0755 "$rootfs/bin/garbage-stats" "$rootfs/bin/resets-connections"
finish faulty-memcached --config.exposedports 11211/tcp
for fault in garbage-stats resets-connections; do
	umoci config --image "$layout:faulty-memcached" --tag "faulty-memcached-$fault" \
		--config.entrypoint /bin/nc --config.entrypoint -ll --config.entrypoint -p \
		--config.entrypoint 11211 --config.entrypoint -e --config.entrypoint "/bin/$fault"
done
umoci gc --layout "$layout"
echo "$layout: memcached ($version), memcached-previous ($previous), memcached-exporter ($exporter_version), pause (catatonit), faulty-memcached"
