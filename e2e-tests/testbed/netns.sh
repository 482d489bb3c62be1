#!/usr/bin/env bash
# Run a command in a fresh network namespace whose loopback also owns the
# e2e pod range (10.244.0.0/16 unless $E2E_POD_CIDR), so the fake pods'
# addresses are real: memcached binds them and the controller dials them.
# Root runs `unshare -n`; other users get a user namespace too (`unshare -rn`).
set -euo pipefail
cidr=${E2E_POD_CIDR:-10.244.0.0/16}
if [[ ${E2E_IN_NETNS:-} != 1 ]]; then
	if [[ $(id -u) == 0 ]]; then flags=(--net); else flags=(--net --map-root-user); fi
	exec env E2E_IN_NETNS=1 unshare "${flags[@]}" "$0" "$@"
fi
ip link set lo up
ip route add local "$cidr" dev lo
exec "$@"
