package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// registryMirrorIP is the ClusterIP of kube-system/registry-mirror, the
// name CoreDNS gives the mirrored registries (nodeconfig.go).
const registryMirrorIP = "10.96.0.20"

// serviceProxyName marks a Service kube-proxy leaves alone: the API server
// and CoreDNS listen on their ClusterIPs themselves (nodehost.go).
const serviceProxyName = "service.kubernetes.io/service-proxy-name"

// createDNSService creates kube-system/kube-dns on dnsServiceIP, the address
// the kubelet gives pods as their nameserver, as a cluster's DNS add-on
// does; it has no selector: CoreDNS is no pod here (node.sh runs it). It and
// the kubernetes Service, whose endpoints no reconciler writes here, carry
// serviceProxyName: kube-proxy would refuse connections to them otherwise.
func createDNSService(ctx context.Context, client kubernetes.Interface) error {
	port := func(name string, protocol corev1.Protocol) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Protocol: protocol, Port: 53, TargetPort: intstr.FromInt32(53)}
	}
	service := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: metav1.NamespaceSystem, Labels: map[string]string{
			"k8s-app": "kube-dns", serviceProxyName: "e2e-node",
		}},
		Spec: corev1.ServiceSpec{
			ClusterIP: dnsServiceIP,
			Ports:     []corev1.ServicePort{port("dns", corev1.ProtocolUDP), port("dns-tcp", corev1.ProtocolTCP)},
		},
	}
	if err := createService(ctx, client, service); err != nil {
		return err
	}
	// The API server creates the kubernetes Service shortly after it is ready.
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"e2e-node"}}}`, serviceProxyName)
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Services(metav1.NamespaceDefault).Patch(ctx, "kubernetes", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// createRegistryMirror creates kube-system/registry-mirror on
// registryMirrorIP: port 80 to the suite's registry (listening on every
// address of the suite's network namespace, so at the node's IP too).
// Pods that resolve a mirrored registry's name reach it through kube-proxy,
// over plain HTTP (policy-server does for a source marked insecure, after
// trying HTTPS: port 443 leads to the same plain HTTP listener, so that try
// fails at once instead of waiting for an address nobody answers).
func createRegistryMirror(ctx context.Context, client kubernetes.Interface, registry string) error {
	_, portText, err := net.SplitHostPort(registry)
	if err != nil {
		return err
	}
	port, err := strconv.ParseInt(portText, 10, 32)
	if err != nil {
		return err
	}
	service := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "registry-mirror", Namespace: metav1.NamespaceSystem},
		Spec: corev1.ServiceSpec{
			ClusterIP: registryMirrorIP,
			Ports: []corev1.ServicePort{
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(int32(port))},
				{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(int32(port))},
			},
		},
	}
	if err := createService(ctx, client, service); err != nil {
		return err
	}
	ready := true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "registry-mirror", Namespace: metav1.NamespaceSystem, Labels: map[string]string{
			discoveryv1.LabelServiceName: "registry-mirror", discoveryv1.LabelManagedBy: "e2e-cluster",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{nodeIP}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports: []discoveryv1.EndpointPort{
			{Name: ptrTo("http"), Protocol: ptrTo(corev1.ProtocolTCP), Port: ptrTo(int32(port))},
			{Name: ptrTo("https"), Protocol: ptrTo(corev1.ProtocolTCP), Port: ptrTo(int32(port))},
		},
	}
	_, err = client.DiscoveryV1().EndpointSlices(metav1.NamespaceSystem).Create(ctx, slice, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// createService creates service unless it exists.
func createService(ctx context.Context, client kubernetes.Interface, service *corev1.Service) error {
	_, err := client.CoreV1().Services(service.Namespace).Create(ctx, service, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// waitForDNS waits until CoreDNS answers kubernetes.default.svc with the
// kubernetes Service's address, as pods will ask it.
func waitForDNS(ctx context.Context, nodeExited <-chan struct{}) error {
	resolver := &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var dialer net.Dialer
			return dialer.DialContext(ctx, network, net.JoinHostPort(dnsServiceIP, "53"))
		},
	}
	name := "kubernetes.default.svc." + clusterDomain
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-nodeExited:
			return false, errors.New("the real node's processes stopped")
		default:
		}
		lookup, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		addresses, err := resolver.LookupHost(lookup, name)
		last = err
		return err == nil && slices.Contains(addresses, kubernetesServiceIP), nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("cluster DNS does not answer %s: %w (last: %v)", name, err, last)
	}
	return err
}
