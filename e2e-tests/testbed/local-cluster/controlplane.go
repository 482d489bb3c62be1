package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	etcdserverpb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"
	apiserverapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
	apiserveroptions "k8s.io/kubernetes/cmd/kube-apiserver/app/options"
	kcmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	kcmoptions "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	schedulerapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
	scheduleroptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"
)

// kcmControllers are the kube-controller-manager controllers the operator's
// objects need: Deployments roll out ReplicaSets and Pods, StatefulSets
// create their pods `<name>-<ordinal>` one name each (StatefulSet mode),
// EndpointSlices give the Service its ready addresses (with each StatefulSet
// pod's hostname), the garbage collector follows owner references,
// disruption fills PodDisruptionBudget status, namespaces get their
// default ServiceAccount and are cleaned up when deleted, and the built-in
// view/edit/admin ClusterRoles aggregate the operator's user roles.
const kcmControllers = "deployment,replicaset,statefulset,garbagecollector,disruption,endpointslice,serviceaccount,namespace,clusterrole-aggregation"

// realNodeControllers are added for a real node: every namespace gets the
// kube-root-ca.crt ConfigMap its pods' service account volumes project, Jobs
// and CronJobs run (Kubewarden's audit scanner is a CronJob), and
// HorizontalPodAutoscalers scale (without a metrics API they still hold the
// scale within their bounds: the node suite's autoscaling handover).
const realNodeControllers = ",root-ca-cert-publisher,job,cronjob,horizontalpodautoscaling"

// controlPlane is the running etcd, API server, controller manager and scheduler.
type controlPlane struct {
	kubeconfig string
	// server is the API server's URL, ca the cluster's authority.
	server string
	ca     *authority
	client kubernetes.Interface
	cancel context.CancelFunc
	done   chan struct{}
	etcd   *embed.Etcd
	// apiServer runs the API server until its context ends (restartAPIServer).
	apiServer func(ctx context.Context) error
	// stopAPIServer ends the running API server; apiServerDone closes after.
	stopAPIServer context.CancelFunc
	apiServerDone chan struct{}
	ctx           context.Context
}

// apiServerAccess is where the API server listens, whom it authorizes how,
// and how it reaches kubelets (extra flags).
type apiServerAccess struct {
	bind          string
	port          int
	authorization string
	kubelet       []string
}

// startControlPlane starts etcd, the API server, the controller manager and
// the scheduler; realNode: ready for a kubelet (realNodeAPIServer).
func startControlPlane(parent context.Context, workdir string, realNode bool) (*controlPlane, error) {
	pkiDir := filepath.Join(workdir, "pki")
	if err := os.MkdirAll(pkiDir, 0o755); err != nil {
		return nil, err
	}
	ca, err := newAuthority(pkiDir)
	if err != nil {
		return nil, err
	}
	serving, err := ca.issue("apiserver", "kube-apiserver", nil,
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"})
	if err != nil {
		return nil, err
	}
	admin, err := ca.issue("admin", "admin", []string{"system:masters"}, nil, nil)
	if err != nil {
		return nil, err
	}
	saPublic, saPrivate, err := writeServiceAccountKeys(pkiDir)
	if err != nil {
		return nil, err
	}

	etcd, etcdURL, err := startEtcd(filepath.Join(workdir, "etcd"))
	if err != nil {
		return nil, err
	}
	access := apiServerAccess{bind: "127.0.0.1", authorization: "RBAC"}
	if realNode {
		if access, err = realNodeAPIServer(ca); err != nil {
			return nil, err
		}
	} else if access.port, err = freePort(); err != nil {
		return nil, err
	}
	server := "https://127.0.0.1:" + strconv.Itoa(access.port)
	kubeconfig := filepath.Join(workdir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, server, ca.certPEM(), admin); err != nil {
		return nil, err
	}

	ctx, cancel := context.WithCancel(parent)
	cp := &controlPlane{kubeconfig: kubeconfig, server: server, ca: ca, cancel: cancel, done: make(chan struct{}), etcd: etcd, ctx: ctx}
	apiServerArgs := append([]string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=" + access.bind,
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(access.port),
		"--tls-cert-file=" + serving.certPath,
		"--tls-private-key-file=" + serving.keyPath,
		"--client-ca-file=" + ca.certPath(),
		"--service-account-key-file=" + saPublic,
		"--service-account-signing-key-file=" + saPrivate,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=" + serviceClusterIPRange,
		"--authorization-mode=" + access.authorization,
		"--allow-privileged=true",
		// New nodes would be tainted not-ready until the node lifecycle
		// controller sees kubelet heartbeats; kwok's nodes are Ready at once.
		"--disable-admission-plugins=TaintNodesByCondition",
		// Endpoints may not hold loopback addresses; nothing here needs
		// the kubernetes Service's endpoints.
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
	}, access.kubelet...)
	cp.apiServer = func(ctx context.Context) error { return runAPIServer(ctx, apiServerArgs) }
	apiserverDone := cp.startAPIServer()
	go func() {
		<-ctx.Done()
		<-cp.apiServerDone
		close(cp.done)
	}()

	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		cancel()
		return nil, err
	}
	cp.client, err = kubernetes.NewForConfig(config)
	if err != nil {
		cancel()
		return nil, err
	}
	if err := waitForAPIServer(ctx, cp.client, apiserverDone); err != nil {
		cancel()
		return nil, err
	}

	controllers := kcmControllers
	if realNode {
		controllers += realNodeControllers
	}
	kcmArgs := []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + controllers,
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
		"--concurrent-deployment-syncs=10",
		"--concurrent-replicaset-syncs=10",
		"--concurrent-service-endpoint-syncs=10",
	}
	schedulerArgs := []string{"--kubeconfig=" + kubeconfig, "--leader-elect=false", "--secure-port=0"}
	go func() { report(ctx, "kube-controller-manager", runControllerManager(ctx, kcmArgs)) }()
	go func() { report(ctx, "kube-scheduler", runScheduler(ctx, schedulerArgs)) }()
	return cp, nil
}

// startAPIServer runs the API server in the background; the channel
// carries its error should it stop on its own.
func (cp *controlPlane) startAPIServer() <-chan error {
	ctx, stop := context.WithCancel(cp.ctx)
	cp.stopAPIServer, cp.apiServerDone = stop, make(chan struct{})
	failed := make(chan error, 1)
	go func(done chan struct{}) {
		defer close(done)
		failed <- cp.apiServer(ctx)
	}(cp.apiServerDone)
	return failed
}

// killAPIServer compacts etcd at its current revision and stops the API
// server as its death would: every connection ends, and a client resuming
// a watch from an older revision once it is back (startAPIServerAgain) is
// answered 410 Gone and must list again. Its Run returns only long after
// it stopped serving (its watches drain for a minute): it is gone once its
// port is closed, and its open connections are cut.
func (cp *controlPlane) killAPIServer() error {
	revision := cp.etcd.Server.KV().Rev()
	if _, err := cp.etcd.Server.Compact(cp.ctx, &etcdserverpb.CompactionRequest{Revision: revision, Physical: true}); err != nil {
		return fmt.Errorf("compact etcd at %d: %w", revision, err)
	}
	cp.stopAPIServer()
	address := strings.TrimPrefix(cp.server, "https://")
	closed := wait.PollUntilContextTimeout(cp.ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		conn, err := net.DialTimeout("tcp", address, time.Second)
		if err == nil {
			conn.Close()
		}
		return err != nil, nil
	})
	if closed != nil {
		return fmt.Errorf("kube-apiserver still listens on %s after 30s", address)
	}
	_, port, _ := net.SplitHostPort(address)
	if out, err := exec.Command("ss", "-K", "(", "sport", "=", ":"+port, "or", "dport", "=", ":"+port, ")").CombinedOutput(); err != nil {
		return fmt.Errorf("ss -K: %v: %s", err, out)
	}
	return nil
}

// startAPIServerAgain starts the API server killAPIServer stopped and waits
// until it is ready.
func (cp *controlPlane) startAPIServerAgain() error {
	return waitForAPIServer(cp.ctx, cp.client, cp.startAPIServer())
}

// stop shuts the API server down, then etcd.
func (cp *controlPlane) stop() {
	cp.cancel()
	select {
	case <-cp.done:
	case <-time.After(30 * time.Second):
	}
	cp.etcd.Close()
}

// report logs a component that failed while the cluster was meant to run.
func report(ctx context.Context, component string, err error) {
	if err != nil && ctx.Err() == nil {
		klog.ErrorS(err, "component stopped", "component", component)
		fmt.Fprintf(os.Stderr, "%s stopped: %v\n", component, err)
	}
}

func startEtcd(dir string) (*embed.Etcd, string, error) {
	clientPort, err := freePort()
	if err != nil {
		return nil, "", err
	}
	peerPort, err := freePort()
	if err != nil {
		return nil, "", err
	}
	client := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(clientPort)}
	peer := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(peerPort)}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{filepath.Join(filepath.Dir(dir), "etcd.log")}
	// A throwaway test cluster: durability is not worth the fsync latency.
	cfg.UnsafeNoFsync = true
	etcd, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", err
	}
	select {
	case <-etcd.Server.ReadyNotify():
		return etcd, client.String(), nil
	case <-time.After(time.Minute):
		etcd.Close()
		return nil, "", fmt.Errorf("etcd did not become ready within a minute")
	}
}

func runAPIServer(ctx context.Context, args []string) error {
	s := apiserveroptions.NewServerRunOptions()
	if err := parseFlags("kube-apiserver", s.Flags(), args); err != nil {
		return err
	}
	if err := s.GenericServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
		return err
	}
	completed, err := s.Complete(ctx)
	if err != nil {
		return err
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return fmt.Errorf("kube-apiserver options: %v", errs)
	}
	return apiserverapp.Run(ctx, completed)
}

func runControllerManager(ctx context.Context, args []string) error {
	s, err := kcmoptions.NewKubeControllerManagerOptions()
	if err != nil {
		return err
	}
	known, disabled, aliases := kcmapp.KnownControllers(), kcmapp.ControllersDisabledByDefault(), kcmapp.ControllerAliases()
	flags := s.Flags(known, disabled, aliases)
	s.ParsedFlags = &flags
	if err := parseFlags("kube-controller-manager", flags, args); err != nil {
		return err
	}
	if err := s.ComponentGlobalsRegistry.Set(); err != nil {
		return err
	}
	c, err := s.Config(ctx, known, disabled, aliases)
	if err != nil {
		return err
	}
	return kcmapp.Run(ctx, c.Complete())
}

func runScheduler(ctx context.Context, args []string) error {
	opts := scheduleroptions.NewOptions()
	if err := parseFlags("kube-scheduler", *opts.Flags, args); err != nil {
		return err
	}
	if err := opts.ComponentGlobalsRegistry.Set(); err != nil {
		return err
	}
	cc, scheduler, err := schedulerapp.Setup(ctx, opts)
	if err != nil {
		return err
	}
	return schedulerapp.Run(ctx, cc, scheduler)
}

// parseFlags parses a component's command line into its options.
func parseFlags(component string, named cliflag.NamedFlagSets, args []string) error {
	fs := pflag.NewFlagSet(component, pflag.ContinueOnError)
	for _, name := range named.Order {
		fs.AddFlagSet(named.FlagSets[name])
	}
	return fs.Parse(args)
}

// waitForAPIServer waits for /readyz, or for the API server to fail.
func waitForAPIServer(ctx context.Context, client kubernetes.Interface, failed <-chan error) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-failed:
			return false, fmt.Errorf("kube-apiserver stopped: %w", err)
		default:
		}
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
}

func writeKubeconfig(path, server string, caPEM []byte, admin *keyPair) error {
	config := clientcmdapi.NewConfig()
	config.Clusters["e2e"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	config.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: admin.certPEM, ClientKeyData: admin.keyPEM}
	config.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "admin", Namespace: "default"}
	config.CurrentContext = "e2e"
	return clientcmd.WriteToFile(*config, path)
}

func freePort() (int, error) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer listener.Close()
	return listener.Addr().(*net.TCPAddr).Port, nil
}
