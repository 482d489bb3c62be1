package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/template"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// The real node: a kubelet of the control plane's release on containerd and
// runc, its pods on a bridge in their own range, and CoreDNS serving
// cluster.local to them. Its name, its label and its taint are how tests
// steer pods to it (nodeSelector type=real and a toleration); the kwok nodes
// carry type=kwok.
const (
	realNodeName  = "real-node"
	realNodeTaint = "e2e.c5c3.io/real-node"
	// nodeBridge carries the node's IP and is the pods' gateway.
	nodeBridge = "e2e-node"
	nodeIP     = "10.245.0.1"
	// realPodCIDR is outside the kwok pods' range, which is routed to lo.
	realPodCIDR = "10.245.0.0/24"
	// kubernetesServiceIP is the `kubernetes` Service's ClusterIP (the first
	// address of --service-cluster-ip-range) and dnsServiceIP kube-dns's.
	// Both are local addresses of the node's network namespace: the API
	// server listens on every address at 443 and CoreDNS on dnsServiceIP,
	// so pods reach both without kube-proxy.
	kubernetesServiceIP = "10.96.0.1"
	// serviceClusterIPRange holds the Services' ClusterIPs; the node routes
	// it to the bridge, so kube-proxy's rules see connections to them.
	serviceClusterIPRange = "10.96.0.0/16"
	dnsServiceIP          = "10.96.0.10"
	clusterDomain         = "cluster.local"
	apiServerPort         = 443
)

//go:embed node.sh
var nodeScript string

// realNodeConfig is what startRealNode needs besides the control plane.
type realNodeConfig struct {
	// bin holds kubelet, containerd, containerd-shim-runc-v2 and coredns.
	bin string
	// registry is the host:port of the OCI registry the node pulls
	// docker.io, registry.k8s.io and ghcr.io images from.
	registry string
	// dir holds the node's configuration, logs and state file.
	dir string
}

// realNode is the running node: unshare, whose child catatonit is PID 1 of
// the node's PID namespace; killing unshare kills the whole namespace.
type realNode struct {
	cmd    *exec.Cmd
	exited chan struct{}
	host   *hostState
}

// startRealNode sets the host up (bridge, service addresses, cgroups,
// sysctls saved), writes the configuration, starts the node's processes
// in their namespaces and waits until the node is Ready and cluster DNS
// answers. On error everything it did is undone.
func startRealNode(ctx context.Context, cp *controlPlane, config realNodeConfig) (node *realNode, err error) {
	if err := requirePrivateNetwork(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(config.dir, 0o755); err != nil {
		return nil, err
	}
	host, err := prepareHost(config.dir)
	if err != nil {
		return nil, err
	}
	node = &realNode{host: host, exited: make(chan struct{})}
	defer func() {
		if err != nil {
			node.stop()
			node = nil
		}
	}()
	if err := writeNodeConfig(cp, config, host.cgroupRoot); err != nil {
		return node, err
	}
	if err := createDNSService(ctx, cp.client); err != nil {
		return node, err
	}
	if err := createRegistryMirror(ctx, cp.client, config.registry); err != nil {
		return node, err
	}
	if err := node.start(config); err != nil {
		return node, err
	}
	started := time.Now()
	if err := node.waitReady(ctx, cp.client); err != nil {
		return node, fmt.Errorf("%w; see %s", err, config.dir)
	}
	ready := time.Since(started)
	if err := waitForDNS(ctx, node.exited); err != nil {
		return node, fmt.Errorf("%w; see %s", err, filepath.Join(config.dir, "coredns.log"))
	}
	klog.InfoS("real node ready", "node", realNodeName, "ready", ready, "dns", time.Since(started))
	fmt.Printf("real node %s Ready in %.1fs, cluster DNS in %.1fs\n", realNodeName, ready.Seconds(), time.Since(started).Seconds())
	return node, nil
}

// realNodeAPIServer: the API server listens on every address at 443, so
// pods reach it at the kubernetes Service's address; the Node authorizer
// lets the kubelet's identity manage its node; logs and exec reach the
// kubelet at the node's IP (not its name, which no DNS knows), with a client
// certificate the kubelet verifies against the cluster CA.
func realNodeAPIServer(ca *authority) (apiServerAccess, error) {
	client, err := ca.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil, nil)
	if err != nil {
		return apiServerAccess{}, err
	}
	return apiServerAccess{bind: "0.0.0.0", port: apiServerPort, authorization: "Node,RBAC", kubelet: []string{
		"--kubelet-client-certificate=" + client.certPath,
		"--kubelet-client-key=" + client.keyPath,
		"--kubelet-preferred-address-types=InternalIP",
	}}, nil
}

// requirePrivateNetwork refuses to run in the host's network namespace: the
// node adds a bridge, addresses and routes that must vanish with the
// suite's namespace (e2e-tests/testbed/netns.sh).
func requirePrivateNetwork() error {
	own, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return err
	}
	if initial, err := os.Readlink("/proc/1/ns/net"); err == nil && initial == own {
		return errors.New("the real node changes the network: run inside e2e-tests/testbed/netns.sh")
	}
	return nil
}

// start runs node.sh under catatonit, as PID 1 of a new PID namespace with
// its own /proc, in a new mount namespace. --kill-child: when unshare dies
// (even killed, as it is when this process dies: Pdeathsig), catatonit is
// killed and with it every process of the namespace.
func (n *realNode) start(config realNodeConfig) error {
	script := filepath.Join(config.dir, "node.sh")
	if err := writeTemplate(script, nodeScript, map[string]any{
		"Dir": config.dir, "Node": realNodeName, "NodeIP": nodeIP,
	}); err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(config.dir, "node.log"))
	if err != nil {
		return err
	}
	cmd := exec.Command("unshare", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc",
		"catatonit", "--", "bash", script)
	bin, err := filepath.Abs(config.bin)
	if err != nil {
		log.Close()
		return err
	}
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("starting the real node: %w", err)
	}
	n.cmd = cmd
	go func() {
		err := cmd.Wait()
		log.Close()
		close(n.exited)
		klog.InfoS("real node stopped", "err", err)
	}()
	// The test reads the state file to check that teardown left nothing.
	state := fmt.Sprintf("pid=%d\ncgroupRoot=%s\n", cmd.Process.Pid, n.host.cgroupRoot)
	return os.WriteFile(filepath.Join(config.dir, "state"), []byte(state), 0o644)
}

// waitReady waits until the kubelet registered the node and reports it Ready.
func (n *realNode) waitReady(ctx context.Context, client kubernetes.Interface) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-n.exited:
			return false, errors.New("the real node's processes stopped")
		default:
		}
		node, err := client.CoreV1().Nodes().Get(ctx, realNodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, condition := range node.Status.Conditions {
			if condition.Type == corev1.NodeReady {
				return condition.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
}

// stop kills the node's PID namespace, waits until it is gone (its mount
// namespace, tmpfs mounts and pod network namespaces go with it), then
// removes the cgroups and restores the host's sysctls and network.
//
// SIGKILL goes to catatonit, the namespace's init: the kernel kills every
// other process of the namespace and lets unshare reap catatonit only once
// they are all gone, so unshare's exit means the namespace is empty.
// (Killing unshare first would return before that.)
func (n *realNode) stop() {
	if n.cmd != nil {
		target := n.cmd.Process
		if init, err := childOf(target.Pid); err == nil {
			target = init
		}
		_ = target.Kill()
		select {
		case <-n.exited:
		case <-time.After(30 * time.Second):
			klog.InfoS("the real node did not stop within 30s of SIGKILL", "pid", n.cmd.Process.Pid)
		}
	}
	n.host.restore()
}

// writeTemplate renders a text/template to path.
func writeTemplate(path, text string, data any) error {
	parsed, err := template.New(filepath.Base(path)).Parse(text)
	if err != nil {
		return err
	}
	var out strings.Builder
	if err := parsed.Execute(&out, data); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(out.String()), 0o644)
}

// childOf is the one child of process pid (unshare's: catatonit).
func childOf(pid int) (*os.Process, error) {
	children, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return nil, err
	}
	fields := strings.Fields(string(children))
	if len(fields) != 1 {
		return nil, fmt.Errorf("process %d has children %q", pid, fields)
	}
	child, err := strconv.Atoi(fields[0])
	if err != nil {
		return nil, err
	}
	return os.FindProcess(child)
}
