// Command cluster runs a local Kubernetes control plane for the end-to-end
// tests and the demo: embedded etcd, kube-apiserver, the kube-controller-manager
// controllers the operator relies on, kube-scheduler, kwok's fake nodes and,
// behind every running pod, a real memcached started with the pod's own args,
// or for the operator's own pods (deploy/controller.yaml) the controller
// binary, probed and stopped as the kubelet would.
//
// With --node-bin it also runs a real node (node.go): a kubelet on
// containerd, its pods in real containers, and CoreDNS for cluster.local.
//
// It writes <workdir>/kubeconfig (cluster-admin), prints "cluster ready" once
// nodes are Ready, and stops everything on SIGINT/SIGTERM.
//
// Pods get addresses from each node's podCIDR. The caller arranges for those
// addresses to be local (run inside `unshare -n` with
// `ip route add local <cidr> dev lo`), so memcached can bind them and the
// operator can dial them.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

func main() {
	workdir := flag.String("workdir", "", "directory for etcd data, certificates, kubeconfig and logs (required)")
	nodes := flag.Int("nodes", 6, "number of fake nodes, spread over three zones")
	podCIDR := flag.String("pod-cidr", "10.244.0.0/16", "pod addresses; node i gets the i-th /24")
	memcached := flag.String("memcached", "", "memcached binary to run behind each pod; empty: none")
	controller := flag.String("controller", "", "controller binary to run behind each pod of the operator's image; empty: none")
	var node realNodeConfig
	flag.StringVar(&node.bin, "node-bin", "", "directory with kubelet, containerd, containerd-shim-runc-v2 and coredns: run a real node too; empty: none")
	flag.StringVar(&node.registry, "node-registry", "", "host:port of the OCI registry the real node pulls images from (as a mirror of docker.io, registry.k8s.io and ghcr.io)")
	flag.Parse()
	if *workdir == "" {
		fmt.Fprintln(os.Stderr, "--workdir is required")
		os.Exit(2)
	}
	if node.bin != "" && node.registry == "" {
		fmt.Fprintln(os.Stderr, "--node-bin needs --node-registry")
		os.Exit(2)
	}
	if err := run(*workdir, *nodes, *podCIDR, *memcached, *controller, node); err != nil {
		fmt.Fprintf(os.Stderr, "cluster: %v\n", err)
		os.Exit(1)
	}
}

func run(workdir string, nodes int, podCIDR, memcached, controller string, node realNodeConfig) error {
	workdir, err := filepath.Abs(workdir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(workdir, 0o755); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(workdir, "cluster.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	redirectLogs(logFile)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	started := time.Now()

	realNode := node.bin != ""
	cp, err := startControlPlane(ctx, workdir, realNode)
	if err != nil {
		return err
	}
	defer cp.stop()
	if err := startFakeNodes(ctx, cp.kubeconfig, nodes, podCIDR, controller != ""); err != nil {
		return err
	}
	if memcached != "" || controller != "" {
		config := runtimeConfig{memcached: memcached, controller: controller, kubeconfig: cp.kubeconfig, root: filepath.Join(workdir, "pods")}
		stopPods, err := startPodRuntime(ctx, cp.client, config)
		if err != nil {
			return err
		}
		defer stopPods()
	}
	if realNode {
		node.dir = filepath.Join(workdir, "node")
		running, err := startRealNode(ctx, cp, node)
		if err != nil {
			return err
		}
		defer running.stop()
		nodes++
	}
	if err := waitForNodes(ctx, cp.client, nodes); err != nil {
		return err
	}
	fmt.Printf("cluster ready in %.1fs: kubeconfig=%s\n", time.Since(started).Seconds(), cp.kubeconfig)

	// The suites' fault: SIGUSR1 compacts etcd and kills the API server,
	// SIGUSR2 starts it again.
	kill, start := make(chan os.Signal, 1), make(chan os.Signal, 1)
	signal.Notify(kill, syscall.SIGUSR1)
	signal.Notify(start, syscall.SIGUSR2)
	for {
		select {
		case <-ctx.Done():
			fmt.Println("cluster stopping")
			return nil
		case <-kill:
			if err := cp.killAPIServer(); err != nil {
				fmt.Printf("api server stop failed: %v\n", err)
			} else {
				fmt.Println("api server stopped")
			}
		case <-start:
			began := time.Now()
			if err := cp.startAPIServerAgain(); err != nil {
				fmt.Printf("api server start failed: %v\n", err)
			} else {
				fmt.Printf("api server started in %.1fs\n", time.Since(began).Seconds())
			}
		}
	}
}

// redirectLogs sends the components' logs (klog, kwok's slog, the standard
// logger) to the log file, keeping stdout for the ready line.
func redirectLogs(file *os.File) {
	flags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(flags)
	for name, value := range map[string]string{"logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL", "one_output": "true"} {
		_ = flags.Set(name, value)
	}
	klog.SetOutput(file)
	log.SetOutput(file)
	slog.SetDefault(slog.New(slog.NewTextHandler(file, nil)))
}
