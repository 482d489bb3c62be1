#!/usr/bin/env bash
# The real node's processes (node.go renders this file): run by catatonit as
# PID 1 of a private PID and mount namespace. kubelet, containerd, runc and
# the CNI plugins write below /run, /var/lib and /var/log whatever their
# configuration says: private tmpfs mounts there keep the host untouched.
# CoreDNS, containerd and kube-proxy start, then the kubelet once containerd
# listens; the first of them to exit ends the script, and catatonit with it,
# which kills every process of the namespace.
set -euo pipefail
dir={{printf "%q" .Dir}}
for path in /run /var/lib /var/log; do
	mount -t tmpfs -o mode=0755 e2e-node "$path"
done
coredns -conf "$dir/Corefile" >"$dir/coredns.log" 2>&1 &
kube-proxy --config "$dir/kube-proxy.yaml" >"$dir/kube-proxy.log" 2>&1 &
containerd --config "$dir/containerd.toml" >"$dir/containerd.log" 2>&1 &
containerd=$!
until [[ -S /run/containerd/containerd.sock ]]; do
	kill -0 "$containerd" || { echo "containerd exited; see $dir/containerd.log"; exit 1; }
	sleep 0.1
done
kubelet --config "$dir/kubelet.yaml" --kubeconfig "$dir/kubelet.kubeconfig" \
	--hostname-override {{.Node}} --node-ip {{.NodeIP}} --node-labels type=real \
	>"$dir/kubelet.log" 2>&1 &
wait -n
echo "a node process exited; see $dir"
exit 1
