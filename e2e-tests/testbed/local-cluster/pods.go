package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// memcachedContainer is the container the operator runs memcached in.
const memcachedContainer = "memcached"

// With warm restarts the container runs a supervisor that reads memcached's
// args, one per line, from this pod annotation, and restarts memcached warm
// when it or the Secret hash annotation changes (api/src/render/warm_restart.rs).
const (
	argsAnnotation       = "memcached.c5c3.io/args"
	secretHashAnnotation = "memcached.c5c3.io/secret-hash"
)

// podRuntime plays the kubelet's container runtime, for two kinds of pods.
//
// memcached: for every Running pod with a memcached container it starts the
// real memcached on the pod's IP with the container's args (or those of the
// pod's args annotation, as the warm-restart supervisor does), its Secret
// and emptyDir volumes written where the args expect them, marks the pod
// Ready once memcached listens, and kills it when the pod goes away. Like the
// supervisor, it restarts memcached warm (SIGUSR1 saves, the start a second
// later restores) when the pod's args or Secret hash annotations change. A
// pod whose Secret is missing stays unready and is retried, like a pod stuck
// in ContainerCreating.
//
// The operator (operator.go): a pod whose container runs the operator's
// image runs the controller binary, probed and stopped as the kubelet would.
type podRuntime struct {
	client     kubernetes.Interface
	memcached  string
	controller string
	// api is where the controller's pods reach the API server.
	api  *rest.Config
	root string

	mu      sync.Mutex
	running map[types.UID]*process
	// emptyDirs are the emptyDir volumes written, removed with their pod or
	// when the node stops (a memory file is up to maxMemoryMB).
	emptyDirs map[string]struct{}
}

// runtimeConfig is what startPodRuntime needs besides the client.
type runtimeConfig struct {
	// memcached and controller are the binaries behind memcached containers
	// and operator containers; empty: such pods are not run.
	memcached, controller string
	// kubeconfig is the admin kubeconfig: the API server's address and CA.
	kubeconfig string
	// root holds a directory per pod (volumes, kubeconfig, container logs).
	root string
}

// process is one pod's container; exited is closed once it has been reaped.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	// graceful: stopped like the kubelet stops a container (SIGTERM, the
	// grace period, SIGKILL), then the pod is removed; else SIGKILL.
	graceful bool
	// stopProbes ends its readiness probe (graceful processes).
	stopProbes context.CancelFunc
	// terminating: SIGTERM was sent (under podRuntime.mu).
	terminating bool
	// config: the pod's args and Secret hash annotations it started with.
	config string
}

// startPodRuntime runs the pods of the fake nodes until ctx ends; the
// returned stop waits for their processes and removes their emptyDirs.
func startPodRuntime(ctx context.Context, client kubernetes.Interface, config runtimeConfig) (stop func(), err error) {
	r := &podRuntime{client: client, root: config.root, running: map[types.UID]*process{}, emptyDirs: map[string]struct{}{}}
	if config.memcached != "" {
		if r.memcached, err = exec.LookPath(config.memcached); err != nil {
			return nil, err
		}
	}
	if config.controller != "" {
		if r.controller, err = exec.LookPath(config.controller); err != nil {
			return nil, err
		}
		if r.api, err = clientcmd.BuildConfigFromFlags("", config.kubeconfig); err != nil {
			return nil, err
		}
	}
	// The periodic resync retries pods whose Secrets were missing, as the
	// kubelet keeps retrying volume mounts.
	factory := informers.NewSharedInformerFactory(client, 10*time.Second)
	informer := factory.Core().V1().Pods().Informer()
	_, err = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.sync(ctx, obj) },
		UpdateFunc: func(_, obj any) { r.sync(ctx, obj) },
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				r.stop(ctx, pod, true)
				r.removeEmptyDirs(pod)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	return r.stopAll, nil
}

func (r *podRuntime) sync(ctx context.Context, obj any) {
	pod, ok := obj.(*corev1.Pod)
	// The real node's kubelet runs its pods.
	if !ok || pod.Spec.NodeName == realNodeName {
		return
	}
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		r.stop(ctx, pod, false)
		return
	}
	if pod.Status.PodIP == "" {
		return
	}
	memcached := containerNamed(pod, memcachedContainer)
	controller := r.operatorContainer(pod)
	if (memcached == nil || r.memcached == "") && controller == nil {
		return
	}
	r.forgetExited(ctx, pod)
	r.mu.Lock()
	proc, started := r.running[pod.UID]
	r.mu.Unlock()
	if started && memcached != nil && proc.config != supervisedConfig(pod) && supervised(pod) {
		r.restartWarm(ctx, pod, memcached, proc)
		return
	}
	if started {
		return
	}
	dir := r.podDir(pod)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		klog.ErrorS(err, "pod directory", "pod", klog.KObj(pod))
		return
	}
	var err error
	if controller != nil {
		err = r.startController(ctx, pod, controller, dir)
	} else {
		err = r.startMemcached(ctx, pod, memcached, dir)
	}
	if err != nil {
		klog.ErrorS(err, "container not started", "pod", klog.KObj(pod))
	}
}

func (r *podRuntime) startMemcached(ctx context.Context, pod *corev1.Pod, container *corev1.Container, dir string) error {
	mounts, err := r.writeVolumes(ctx, pod, container, dir)
	if err != nil {
		return err
	}
	args := []string{"-l", pod.Status.PodIP}
	if os.Geteuid() == 0 {
		// memcached refuses to run as root without naming the user to run as.
		args = append(args, "-u", "root")
	}
	given := append(commandArgs(container), container.Args...)
	if supervised(pod) {
		given = strings.Split(pod.Annotations[argsAnnotation], "\n")
	}
	for _, arg := range given {
		for mountPath, hostPath := range mounts {
			arg = strings.ReplaceAll(arg, mountPath+"/", hostPath+"/")
		}
		args = append(args, arg)
	}
	proc, err := spawn(pod, container, dir, exec.Command(r.memcached, args...))
	if err != nil {
		return err
	}
	proc.config = supervisedConfig(pod)
	r.mu.Lock()
	r.running[pod.UID] = proc
	r.mu.Unlock()
	go r.markReadyWhenListening(ctx, pod, memcachedPort(container), proc.exited)
	return nil
}

// supervised: the pod's memcached runs under the warm-restart supervisor.
func supervised(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[argsAnnotation]
	return ok
}

// supervisedConfig is what the supervisor restarts memcached for.
func supervisedConfig(pod *corev1.Pod) string {
	return pod.Annotations[argsAnnotation] + "\n" + pod.Annotations[secretHashAnnotation]
}

// restartWarm does what the supervisor does when the pod's annotations
// change: SIGUSR1 (memcached saves its memory file and exits), then, a second
// later (memcached restores nothing in the second of its save), memcached
// again with the new args and the Secret files as they are now.
func (r *podRuntime) restartWarm(ctx context.Context, pod *corev1.Pod, container *corev1.Container, proc *process) {
	r.mu.Lock()
	delete(r.running, pod.UID)
	r.mu.Unlock()
	_ = proc.cmd.Process.Signal(syscall.SIGUSR1)
	select {
	case <-proc.exited:
	case <-time.After(10 * time.Second):
		proc.kill()
	}
	time.Sleep(time.Second)
	if err := r.startMemcached(ctx, pod, container, r.podDir(pod)); err != nil {
		klog.ErrorS(err, "memcached not restarted", "pod", klog.KObj(pod))
	}
}

// spawn starts a container's process, its output in <dir>/<container>.log,
// and reaps it in the background.
func spawn(pod *corev1.Pod, container *corev1.Container, dir string, cmd *exec.Cmd) (*process, error) {
	// Appended to: a restarted container keeps its earlier output.
	log, err := os.OpenFile(filepath.Join(dir, container.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	klog.InfoS("container started", "pod", klog.KObj(pod), "container", container.Name, "ip", pod.Status.PodIP, "args", cmd.Args[1:])
	proc := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		log.Close()
		close(proc.exited)
		klog.InfoS("container exited", "pod", klog.KObj(pod), "container", container.Name, "err", err)
	}()
	return proc, nil
}

// markReadyWhenListening plays the readiness probe: once memcached accepts
// connections on the pod's address, the pod and its containers become Ready.
// Like the kubelet's probe it keeps trying as long as the container runs: a
// memcached with a warm-restart memory file fills all of it before it listens
// (seconds per GiB on a loaded machine).
func (r *podRuntime) markReadyWhenListening(ctx context.Context, pod *corev1.Pod, port int32, exited <-chan struct{}) {
	address := net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(port)))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		conn, err := net.DialTimeout("tcp", address, time.Second)
		if err != nil {
			return false, nil
		}
		return true, conn.Close()
	})
	if err != nil {
		klog.ErrorS(err, "memcached did not listen before it exited", "pod", klog.KObj(pod), "address", address)
		return
	}
	r.setReady(ctx, pod, true)
}

// setReady sets the pod's Ready and ContainersReady conditions and its
// containers' ready flags, as the kubelet does after readiness probes.
func (r *podRuntime) setReady(ctx context.Context, pod *corev1.Pod, ready bool) {
	status, reason := corev1.ConditionTrue, ""
	if !ready {
		status, reason = corev1.ConditionFalse, "ContainersNotReady"
	}
	pods := r.client.CoreV1().Pods(pod.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || current.UID != pod.UID {
			return err
		}
		now := metav1.Now()
		for i := range current.Status.Conditions {
			if condition := &current.Status.Conditions[i]; condition.Type == corev1.PodReady || condition.Type == corev1.ContainersReady {
				condition.Status, condition.Reason, condition.LastTransitionTime = status, reason, now
			}
		}
		for i := range current.Status.ContainerStatuses {
			current.Status.ContainerStatuses[i].Ready = ready
		}
		_, err = pods.UpdateStatus(ctx, current, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		klog.ErrorS(err, "setting the pod's readiness", "pod", klog.KObj(pod), "ready", ready)
	}
}

// memcachedPort is the container's "memcached" port, 11211 by default.
func memcachedPort(container *corev1.Container) int32 {
	for _, port := range container.Ports {
		if port.Name == "memcached" {
			return port.ContainerPort
		}
	}
	return 11211
}

// commandArgs is what a container's command adds after the executable: the
// image's entrypoint is memcached itself, so only an explicit command other
// than memcached contributes arguments.
func commandArgs(container *corev1.Container) []string {
	if len(container.Command) == 0 || filepath.Base(container.Command[0]) != "memcached" {
		return container.Command
	}
	return container.Command[1:]
}

// writeVolumes writes the container's Secret volumes below dir, as the kubelet
// would mount them, and returns mount path -> directory.
func (r *podRuntime) writeVolumes(ctx context.Context, pod *corev1.Pod, container *corev1.Container, dir string) (map[string]string, error) {
	mounts := map[string]string{}
	for _, mount := range container.VolumeMounts {
		volume := volumeNamed(pod, mount.Name)
		if volume != nil && volume.EmptyDir != nil {
			// The warm-restart memory file's volume: kept across restarts.
			target := filepath.Join(dir, mount.Name)
			if err := os.MkdirAll(target, 0o777); err != nil {
				return nil, err
			}
			r.mu.Lock()
			r.emptyDirs[target] = struct{}{}
			r.mu.Unlock()
			mounts[strings.TrimSuffix(mount.MountPath, "/")] = target
			continue
		}
		if volume == nil || volume.Secret == nil {
			continue
		}
		secret, err := r.client.CoreV1().Secrets(pod.Namespace).Get(ctx, volume.Secret.SecretName, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", mount.Name, err)
		}
		target := filepath.Join(dir, mount.Name)
		if err := os.MkdirAll(target, 0o755); err != nil {
			return nil, err
		}
		files := map[string]string{}
		for key := range secret.Data {
			files[key] = key
		}
		if len(volume.Secret.Items) > 0 {
			files = map[string]string{}
			for _, item := range volume.Secret.Items {
				files[item.Key] = item.Path
			}
		}
		for key, path := range files {
			if err := os.WriteFile(filepath.Join(target, path), secret.Data[key], 0o644); err != nil {
				return nil, err
			}
		}
		mounts[strings.TrimSuffix(mount.MountPath, "/")] = target
	}
	return mounts, nil
}

// stop ends a pod's process once the pod is deleted or not Running (gone:
// the pod object was removed).
//
// memcached is killed and awaited. Pod events are handled one at a time, so
// a pod recreated under the same name (a StatefulSet pod, new UID) that kwok
// gives the address just freed starts its memcached only after the old one
// released the address: otherwise the readiness check could see the old
// process listening and the new one fail to bind.
//
// A graceful process (the controller) is terminated in the background, and
// its pod removed afterwards (terminate); a pod removed before it was
// terminated (a forced deletion) kills it at once.
func (r *podRuntime) stop(ctx context.Context, pod *corev1.Pod, gone bool) {
	r.mu.Lock()
	proc, ok := r.running[pod.UID]
	if ok && proc.graceful && (proc.terminating || !gone) {
		begin := !proc.terminating
		proc.terminating = true
		r.mu.Unlock()
		if begin {
			go r.terminate(ctx, pod, proc)
		}
		return
	}
	delete(r.running, pod.UID)
	r.mu.Unlock()
	if ok {
		proc.kill()
	} else if !gone && pod.DeletionTimestamp != nil && r.operatorContainer(pod) != nil {
		// Never started: nothing to wait for.
		r.remove(ctx, pod)
	}
}

// podDir is where a pod's processes keep their logs and volumes.
func (r *podRuntime) podDir(pod *corev1.Pod) string {
	return filepath.Join(r.root, pod.Namespace, pod.Name+"-"+string(pod.UID)[:8])
}

// removeEmptyDirs removes a deleted pod's emptyDir volumes (the warm-restart
// memory files, up to maxMemoryMB each), as the kubelet does; its logs stay.
// A process still saving into one writes on into the unlinked file.
func (r *podRuntime) removeEmptyDirs(pod *corev1.Pod) {
	for _, volume := range pod.Spec.Volumes {
		if volume.EmptyDir != nil {
			dir := filepath.Join(r.podDir(pod), volume.Name)
			r.mu.Lock()
			delete(r.emptyDirs, dir)
			r.mu.Unlock()
			if err := os.RemoveAll(dir); err != nil {
				klog.ErrorS(err, "emptyDir not removed", "pod", klog.KObj(pod), "volume", volume.Name)
			}
		}
	}
}

// stopAll kills every process and removes every emptyDir left: the node stops.
func (r *podRuntime) stopAll() {
	r.mu.Lock()
	procs, dirs := r.running, r.emptyDirs
	r.running, r.emptyDirs = map[types.UID]*process{}, map[string]struct{}{}
	r.mu.Unlock()
	for _, proc := range procs {
		proc.kill()
	}
	for dir := range dirs {
		if err := os.RemoveAll(dir); err != nil {
			klog.ErrorS(err, "emptyDir not removed", "dir", dir)
		}
	}
}

// kill sends SIGKILL and waits (up to 10 s) for the process to be reaped.
func (p *process) kill() {
	if p.stopProbes != nil {
		p.stopProbes()
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		klog.InfoS("container did not exit within 10s of SIGKILL", "pid", p.cmd.Process.Pid)
	}
}

func containerNamed(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

func volumeNamed(pod *corev1.Pod, name string) *corev1.Volume {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return &pod.Spec.Volumes[i]
		}
	}
	return nil
}
