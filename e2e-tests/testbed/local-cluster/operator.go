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
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/fieldpath"
	"k8s.io/kubernetes/third_party/forked/golang/expansion"
)

// operatorRepository is the operator's image (deploy/controller.yaml, the
// Helm chart): a container running it, any tag or digest, runs the
// controller binary. pod-delete.yaml matches the same images.
const operatorRepository = "ghcr.io/c5c3/memcached-operator"

// tokenSeconds is the lifetime of a pod's ServiceAccount token (the
// kubelet's default for projected tokens; not refreshed here).
const tokenSeconds int64 = 3600

// defaultGracePeriod is terminationGracePeriodSeconds' default.
const defaultGracePeriod = 30 * time.Second

// operatorContainer is the pod's container running the operator's image,
// when the runtime has a controller binary.
func (r *podRuntime) operatorContainer(pod *corev1.Pod) *corev1.Container {
	if r.controller == "" {
		return nil
	}
	for i := range pod.Spec.Containers {
		rest, ok := strings.CutPrefix(pod.Spec.Containers[i].Image, operatorRepository)
		if ok && (rest == "" || rest[0] == ':' || rest[0] == '@') {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

// startController runs the controller binary as the container would run:
// its command's arguments and args ($(VAR) expanded), its env resolved as
// the kubelet resolves it, authenticated as the pod's ServiceAccount with a
// token bound to the pod (TokenRequest, like the kubelet's projected
// token), its ports named metrics and health bound on the pod's IP (which
// stands in for the pod's network namespace), as are wildcard addresses in
// its arguments (podAddress). The container's readiness
// probe runs until the process is stopped; a process that exits on its own
// is restarted at the next resync (restartPolicy Always).
func (r *podRuntime) startController(ctx context.Context, pod *corev1.Pod, container *corev1.Container, dir string) error {
	env, values, err := containerEnv(pod, container)
	if err != nil {
		return err
	}
	kubeconfig, err := r.writePodKubeconfig(ctx, pod, dir)
	if err != nil {
		return err
	}
	env = append(env, "KUBECONFIG="+kubeconfig)
	for _, bind := range [][2]string{{"METRICS_ADDRESS", "metrics"}, {"HEALTH_ADDRESS", "health"}} {
		port, err := containerPort(container, intstr.FromString(bind[1]))
		if err != nil {
			return err
		}
		env = append(env, bind[0]+"="+net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)))
	}
	// A command replaces the image's entrypoint, the controller.
	var raw []string
	if len(container.Command) > 0 {
		raw = container.Command[1:]
	}
	expand := expansion.MappingFuncFor(values)
	args := make([]string, 0, len(raw)+len(container.Args))
	for _, arg := range append(append([]string{}, raw...), container.Args...) {
		args = append(args, podAddress(expansion.Expand(arg, expand), pod.Status.PodIP))
	}
	cmd := exec.Command(r.controller, args...)
	// What the container sees: its own variables after the runtime's; the
	// ones this runtime sets last (for duplicates exec keeps the last).
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOSTNAME=" + pod.Name}, env...)
	cmd.Dir = dir
	proc, err := spawn(pod, container, dir, cmd)
	if err != nil {
		return err
	}
	probeCtx, stopProbes := context.WithCancel(ctx)
	proc.graceful, proc.stopProbes = true, stopProbes
	r.mu.Lock()
	r.running[pod.UID] = proc
	r.mu.Unlock()
	go r.probeReadiness(probeCtx, pod, container)
	return nil
}

// podAddress puts the pod's IP in place of a wildcard listen address in an
// argument (`ADDRESS` or `--flag=ADDRESS`; host 0.0.0.0, :: or empty, with a
// port): in a pod that address is the pod's own network namespace, here the
// pod's IP stands in for it, so replicas do not bind each other's ports.
func podAddress(arg, podIP string) string {
	prefix, value := "", arg
	if flag, rest, ok := strings.Cut(arg, "="); ok && strings.HasPrefix(flag, "-") {
		prefix, value = flag+"=", rest
	}
	host, port, err := net.SplitHostPort(value)
	if err != nil || (host != "" && host != "0.0.0.0" && host != "::") {
		return arg
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return arg
	}
	return prefix + net.JoinHostPort(podIP, port)
}

// containerEnv is the container's environment as the kubelet resolves it,
// as KEY=value and as a map: literal values ($(VAR) references to earlier
// variables expanded) and downward-API fields. Other sources are refused
// (the pod does not start), not guessed.
func containerEnv(pod *corev1.Pod, container *corev1.Container) ([]string, map[string]string, error) {
	if len(container.EnvFrom) > 0 {
		return nil, nil, fmt.Errorf("container %s: envFrom is not supported", container.Name)
	}
	values := map[string]string{}
	env := make([]string, 0, len(container.Env))
	for _, variable := range container.Env {
		var value string
		switch from := variable.ValueFrom; {
		case from == nil:
			value = expansion.Expand(variable.Value, expansion.MappingFuncFor(values))
		case from.FieldRef != nil:
			var err error
			if value, err = podField(pod, from.FieldRef.FieldPath); err != nil {
				return nil, nil, fmt.Errorf("env %s: %w", variable.Name, err)
			}
		default:
			return nil, nil, fmt.Errorf("env %s: only value and fieldRef are supported", variable.Name)
		}
		values[variable.Name] = value
		env = append(env, variable.Name+"="+value)
	}
	return env, values, nil
}

// podField is a downward-API field of the pod, as the kubelet reads it.
func podField(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	}
	return fieldpath.ExtractFieldPathAsString(pod, path)
}

// writePodKubeconfig writes <dir>/kubeconfig: the API server, authenticated
// with a token of the pod's ServiceAccount bound to the pod, so RBAC sees
// the pod's identity and the token dies with the pod.
func (r *podRuntime) writePodKubeconfig(ctx context.Context, pod *corev1.Pod, dir string) (string, error) {
	account := pod.Spec.ServiceAccountName
	if account == "" {
		account = "default"
	}
	request := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptrTo(tokenSeconds),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	token, err := r.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, account, request, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for ServiceAccount %s: %w", account, err)
	}
	config := clientcmdapi.NewConfig()
	config.Clusters["e2e"] = &clientcmdapi.Cluster{Server: r.api.Host, CertificateAuthorityData: r.api.CAData}
	config.AuthInfos[account] = &clientcmdapi.AuthInfo{Token: token.Status.Token}
	config.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: account, Namespace: pod.Namespace}
	config.CurrentContext = "e2e"
	path := filepath.Join(dir, "kubeconfig")
	return path, clientcmd.WriteToFile(*config, path)
}

// containerPort resolves a port by number or by the container's port name.
func containerPort(container *corev1.Container, port intstr.IntOrString) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, p := range container.Ports {
		if p.Name == port.StrVal {
			return int(p.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("container %s has no port named %q", container.Name, port.StrVal)
}

// terminate stops a graceful process as the kubelet stops a container of a
// deleted pod: SIGTERM, SIGKILL once the pod's grace period is over; then,
// the pod being deleted, removes the pod object (kwok leaves such pods to
// this runtime: pod-delete.yaml).
func (r *podRuntime) terminate(ctx context.Context, pod *corev1.Pod, proc *process) {
	proc.stopProbes()
	grace := defaultGracePeriod
	if seconds := pod.DeletionGracePeriodSeconds; seconds != nil {
		grace = time.Duration(*seconds) * time.Second
	} else if seconds := pod.Spec.TerminationGracePeriodSeconds; seconds != nil {
		grace = time.Duration(*seconds) * time.Second
	}
	klog.InfoS("stopping container: SIGTERM", "pod", klog.KObj(pod), "gracePeriod", grace)
	_ = proc.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-proc.exited:
	case <-time.After(grace):
		klog.InfoS("grace period over: SIGKILL", "pod", klog.KObj(pod))
		proc.kill()
	case <-ctx.Done():
		return
	}
	r.mu.Lock()
	if r.running[pod.UID] == proc {
		delete(r.running, pod.UID)
	}
	r.mu.Unlock()
	if pod.DeletionTimestamp != nil {
		r.remove(ctx, pod)
	}
}

// remove deletes a pod whose containers stopped, as the kubelet does.
func (r *podRuntime) remove(ctx context.Context, pod *corev1.Pod) {
	options := metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(0)), Preconditions: metav1.NewUIDPreconditions(string(pod.UID))}
	err := r.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, options)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		klog.ErrorS(err, "removing the stopped pod", "pod", klog.KObj(pod))
	}
}

// forgetExited forgets a graceful process that exited on its own (not
// terminated), so that sync starts it again (restartPolicy Always, retried
// at each resync); the pod is not ready meanwhile.
func (r *podRuntime) forgetExited(ctx context.Context, pod *corev1.Pod) {
	r.mu.Lock()
	proc, ok := r.running[pod.UID]
	exited := ok && proc.graceful && !proc.terminating && proc.hasExited()
	if exited {
		delete(r.running, pod.UID)
	}
	r.mu.Unlock()
	if exited {
		proc.stopProbes()
		klog.InfoS("container exited: restarting it", "pod", klog.KObj(pod))
		r.setReady(ctx, pod, false)
	}
}

// hasExited: the process has been reaped.
func (p *process) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

func ptrTo[T any](value T) *T {
	return &value
}
