#!/usr/bin/env bash
# Today's memcached as Debian serves it, with the libraries it links, in a root filesystem of its own:
# usage: memcached-newest.sh <dir>
#   <dir>/rootfs    memcached and every shared library it needs (its own glibc and ld-linux: sid's glibc is
#                   newer than a Debian 12 host's), extracted from Debian's packages with dpkg-deb -x, the
#                   merged-/usr symlinks (lib64 -> usr/lib64, ...) as a Debian system has them
#   <dir>/version   the memcached release it is (`memcached -V`, run from the root filesystem)
#   <dir>/packages  the packages it is made of, with their versions
# The newest suite that answers wins: sid, else trixie. apt fetches and verifies them with its own
# configuration in <dir>/apt (APT_CONFIG: none of the host's sources, preferences or state): the suite's
# InRelease signed by a key of /usr/share/keyrings/debian-archive-keyring.gpg, each package's SHA256
# against the signed Packages index. Nothing is pinned: what the suite serves today, recorded in version.
# Its Valid-Until is not enforced (Acquire::Check-Valid-Until false): a mirror that froze sid's index (this
# machine's serves one weeks old) still gives a signed, verified memcached; the index's Date is printed.
# Packages: memcached, and what it Depends on (Pre-Depends too) recursively through libraries only
# (Section libs or a lib* name; not adduser, perl or systemd, which a container does not run); then
# every DT_NEEDED of every ELF file must resolve inside the root filesystem, or this fails.
set -euo pipefail
dir=${1:?usage: memcached-newest.sh <dir>}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -r "$keyring" ] || { echo "$keyring missing (apt-get install debian-archive-keyring)"; exit 1; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
apt=$dir/apt
rm -rf "$apt" "$dir/rootfs.new"
mkdir -p "$apt"/{lists/partial,cache/archives/partial,parts,preferences.d,sources.list.d,debs}
: >"$apt/status"

# The whole apt configuration, the host's left out: its files are read only through Dir::Etc::Parts and
# Dir::Etc::main, both pointed here.
cat >"$apt/apt.conf" <<EOF
Dir::Etc::main "$apt/apt.conf.main";
Dir::Etc::Parts "$apt/parts";
Dir::Etc::SourceList "$apt/sources.list";
Dir::Etc::SourceParts "$apt/sources.list.d";
Dir::Etc::Preferences "$apt/preferences";
Dir::Etc::PreferencesParts "$apt/preferences.d";
Dir::State::Lists "$apt/lists";
Dir::State::status "$apt/status";
Dir::Cache "$apt/cache";
APT::Architecture "amd64";
APT::Architectures { "amd64"; };
Acquire::Languages { "none"; };
Acquire::IndexTargets::deb::DEP-11 { DefaultEnabled "false"; };
Acquire::IndexTargets::deb::DEP-11-icons { DefaultEnabled "false"; };
Acquire::IndexTargets::deb::DEP-11-icons-small { DefaultEnabled "false"; };
Acquire::Check-Valid-Until "false";
APT::Sandbox::User "root";
EOF
: >"$apt/apt.conf.main"
export APT_CONFIG=$apt/apt.conf

suite=
for candidate in sid trixie; do
	echo "deb [signed-by=$keyring] $mirror $candidate main" >"$apt/sources.list"
	rm -rf "$apt/lists" && mkdir -p "$apt/lists/partial"
	# apt-get update exits 0 on a failed fetch or a bad signature (it keeps going with what it has):
	# -o APT::Update::Error-Mode=any makes either fatal, and the index must be there.
	if apt-get -q -o APT::Update::Error-Mode=any update >"$apt/update-$candidate.log" 2>&1 \
		&& apt-cache show memcached >/dev/null 2>&1; then
		suite=$candidate
		break
	fi
	echo "$candidate: apt-get update failed:" >&2
	cat "$apt/update-$candidate.log" >&2
done
[ -n "$suite" ] || { echo "neither sid nor trixie could be fetched from $mirror"; exit 1; }

# field PACKAGE FIELD: the field of the candidate version.
field() {
	apt-cache show --no-all-versions "$1" | sed -n "s/^$2: //p" | head -1
}

# The closure of memcached's Depends and Pre-Depends through libraries, the first of each alternative.
wanted=(memcached)
declare -A seen=([memcached]=1)
i=0
while [ $i -lt ${#wanted[@]} ]; do
	package=${wanted[$i]}
	i=$((i + 1))
	deps=$( (field "$package" Pre-Depends; field "$package" Depends) | tr ',' '\n' \
		| sed 's/|.*//; s/(.*)//; s/:any//; s/[[:space:]]//g' | grep -v '^$' || true)
	for dep in $deps; do
		[ -n "${seen[$dep]:-}" ] && continue
		seen[$dep]=1
		section=$(field "$dep" Section)
		if [ "$section" = libs ] || [[ $dep == lib* ]]; then
			wanted+=("$dep")
		fi
	done
done

(cd "$apt/debs" && apt-get -q download "${wanted[@]}" >"$apt/download.log" 2>&1) || {
	cat "$apt/download.log"
	exit 1
}
rootfs=$dir/rootfs.new
mkdir -p "$rootfs/usr/bin" "$rootfs/usr/sbin" "$rootfs/usr/lib" "$rootfs/usr/lib64"
for link in bin sbin lib lib64; do ln -s "usr/$link" "$rootfs/$link"; done
: >"$dir/packages.new"
for deb in "$apt"/debs/*.deb; do
	dpkg-deb -x "$deb" "$rootfs"
	dpkg-deb -f "$deb" Package Version | paste -sd' ' | sed 's/Package: //; s/ Version: / /' >>"$dir/packages.new"
done
rm -rf "$rootfs"/usr/share/{doc,man,lintian,bug}

# Every DT_NEEDED of every ELF file resolves in the root filesystem's library directories.
libdirs=(usr/lib/x86_64-linux-gnu usr/lib64 usr/lib)
missing=0
while read -r elf; do
	for needed in $(readelf -d "$elf" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
		found=
		# The library directories, and the ELF file's own (glibc's gconv modules: RUNPATH $ORIGIN).
		for libdir in "${libdirs[@]/#/$rootfs/}" "$(dirname "$elf")"; do
			[ -e "$libdir/$needed" ] && found=1 && break
		done
		[ -n "$found" ] || { echo "${elf#"$rootfs"}: $needed is in none of the packages" >&2; missing=1; }
	done
done < <(find "$rootfs" -type f \( -name '*.so*' -o -path '*/bin/*' \) -exec sh -c 'head -c4 "$1" | grep -q ELF' _ {} \; -print)
[ $missing -eq 0 ] || exit 1

loader=$rootfs/usr/lib64/ld-linux-x86-64.so.2
version=$("$loader" --library-path "$rootfs/usr/lib/x86_64-linux-gnu" "$rootfs/usr/bin/memcached" -V | cut -d' ' -f2)
[ -n "$version" ] || { echo "memcached from $suite did not report its version"; exit 1; }
rm -rf "$dir/rootfs"
mv "$rootfs" "$dir/rootfs"
sort -o "$dir/packages" "$dir/packages.new" && rm "$dir/packages.new"
echo "$version" >"$dir/version"
released=$(sed -n 's/^Date: //p' "$apt"/lists/*_"$suite"_InRelease | head -1)
echo "$dir: memcached $version from Debian $suite ($(field memcached Version); the suite's index of $released), $(wc -l <"$dir/packages") packages"
