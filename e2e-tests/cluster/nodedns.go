package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// createDNSService creates kube-system/kube-dns on dnsServiceIP, the address
// the kubelet gives pods as their nameserver, as a cluster's DNS add-on
// does; it has no selector: CoreDNS is no pod here (node.sh runs it).
func createDNSService(ctx context.Context, client kubernetes.Interface) error {
	port := func(name string, protocol corev1.Protocol) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Protocol: protocol, Port: 53, TargetPort: intstr.FromInt32(53)}
	}
	service := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: metav1.NamespaceSystem, Labels: map[string]string{"k8s-app": "kube-dns"}},
		Spec: corev1.ServiceSpec{
			ClusterIP: dnsServiceIP,
			Ports:     []corev1.ServicePort{port("dns", corev1.ProtocolUDP), port("dns-tcp", corev1.ProtocolTCP)},
		},
	}
	_, err := client.CoreV1().Services(metav1.NamespaceSystem).Create(ctx, service, metav1.CreateOptions{})
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
