package main

import (
	"context"
	_ "embed"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	"sigs.k8s.io/kwok/pkg/apis/internalversion"
	"sigs.k8s.io/kwok/pkg/client/clientset/versioned"
	"sigs.k8s.io/kwok/pkg/config"
	"sigs.k8s.io/kwok/pkg/kwok/controllers"
	"sigs.k8s.io/kwok/pkg/utils/client"
)

// podStarted replaces kwok's pod-ready stage: pods come up Running, not
// Ready; the pod runtime marks them Ready once memcached listens.
//
//go:embed pod-started.yaml
var podStarted string

// podDelete replaces kwok's pod-delete stage when the pod runtime runs the
// controller: it leaves the operator's pods to the runtime, which removes
// them once their process stopped.
//
//go:embed pod-delete.yaml
var podDelete string

// fakeNodeAnnotation marks the nodes kwok plays the kubelet for.
const fakeNodeAnnotation = "kwok.x-k8s.io/node"

// startFakeNodes starts kwok's node and pod controllers with its "fast"
// stages (nodes Ready at once; pods removed once deleted, except the
// operator's when the runtime stops them: podDelete) and podStarted, and
// registers `count` nodes, node i owning the i-th /24 of podCIDR.
func startFakeNodes(ctx context.Context, kubeconfig string, count int, podCIDR string, runtimeDeletesOperatorPods bool) error {
	prefix, err := netip.ParsePrefix(podCIDR)
	if err != nil || !prefix.Addr().Is4() || prefix.Bits() > 24-bitsFor(count) {
		return fmt.Errorf("--pod-cidr %q must be an IPv4 range with room for %d /24s", podCIDR, count)
	}
	stages, err := kwokStages(runtimeDeletesOperatorPods)
	if err != nil {
		return err
	}
	clientset, err := client.NewClientset("", kubeconfig)
	if err != nil {
		return err
	}
	restConfig, err := clientset.ToRESTConfig()
	if err != nil {
		return err
	}
	dynamicClient, err := clientset.ToDynamicClient()
	if err != nil {
		return err
	}
	restMapper, err := clientset.ToRESTMapper()
	if err != nil {
		return err
	}
	restClient, err := rest.RESTClientFor(restConfig)
	if err != nil {
		return err
	}
	typedClient, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	kwokClient, err := versioned.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	controller, err := controllers.NewController(controllers.Config{
		Clock:                             clock.RealClock{},
		DynamicClient:                     dynamicClient,
		RESTClient:                        restClient,
		RESTMapper:                        restMapper,
		ImpersonatingDynamicClient:        clientset.ToImpersonatingDynamicClient(),
		ImpersonatingTypedClient:          clientset.ToImpersonatingTypedClient(),
		TypedClient:                       typedClient,
		TypedKwokClient:                   kwokClient,
		ManageNodesWithAnnotationSelector: fakeNodeAnnotation + "=fake",
		CIDR:                              podCIDR,
		NodeIP:                            "192.0.2.1",
		LocalStages:                       stages,
		PodPlayStageParallelism:           8,
		NodePlayStageParallelism:          4,
		NodeLeaseParallelism:              4,
		PodsOnNodeSyncParallelism:         2,
		ID:                                "e2e-cluster",
	})
	if err != nil {
		return err
	}
	if err := controller.Start(ctx); err != nil {
		return err
	}
	base := prefix.Addr().As4()
	for i := range count {
		if err := createNode(ctx, typedClient, i, fmt.Sprintf("%d.%d.%d.0/24", base[0], base[1], int(base[2])+i)); err != nil {
			return err
		}
	}
	return nil
}

// bitsFor is how many bits number `count` /24s.
func bitsFor(count int) int {
	bits := 0
	for 1<<bits < count {
		bits++
	}
	return bits
}

func kwokStages(runtimeDeletesOperatorPods bool) (map[internalversion.StageResourceRef][]*internalversion.Stage, error) {
	grouped := map[internalversion.StageResourceRef][]*internalversion.Stage{}
	deleteStage := podfast.DefaultPodDelete
	if runtimeDeletesOperatorPods {
		deleteStage = podDelete
	}
	for _, raw := range []string{nodefast.DefaultNodeInit, podStarted, podfast.DefaultPodComplete, deleteStage} {
		stage, err := config.UnmarshalWithType[*internalversion.Stage](raw)
		if err != nil {
			return nil, err
		}
		grouped[stage.Spec.ResourceRef] = append(grouped[stage.Spec.ResourceRef], stage)
	}
	return grouped, nil
}

func createNode(ctx context.Context, client kubernetes.Interface, index int, podCIDR string) error {
	name := fmt.Sprintf("kwok-node-%d", index)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{fakeNodeAnnotation: "fake"},
			Labels: map[string]string{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"type":                   "kwok",
				// Three zones, so zone spread constraints can be satisfied.
				"topology.kubernetes.io/zone": fmt.Sprintf("zone-%c", 'a'+index%3),
			},
		},
		Spec: corev1.NodeSpec{PodCIDR: podCIDR, PodCIDRs: []string{podCIDR}},
	}
	_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// waitForNodes waits until `count` nodes are Ready and the default namespace
// has its ServiceAccount, so pods can be created.
func waitForNodes(ctx context.Context, client kubernetes.Interface, count int) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := 0
		for _, node := range nodes.Items {
			for _, condition := range node.Status.Conditions {
				if condition.Type == corev1.NodeReady && condition.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready < count {
			return false, nil
		}
		_, err = client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}
