package main

import (
	_ "embed"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// containerdConfig is containerd's configuration (version 3): the CRI
// plugin with runc from Debian, the CNI plugins from Debian, the pause
// image and registry hosts below, and a non-negative oom_score_adj for
// sandboxes (runc cannot set a negative one without CAP_SYS_RESOURCE).
//
//go:embed node-containerd.toml
var containerdConfig string

// sandboxImage is the pod sandbox ("pause") image: catatonit -P, built
// locally (e2e-tests/testbed/local-cluster/images/images.sh).
const sandboxImage = "registry.k8s.io/pause:catatonit"

// mirroredRegistries are the registries whose images the node pulls from the
// local registry instead: the CRD's default images (memcached:1.6 on
// docker.io, the exporter), the pause image, the operator's and Kubewarden's
// images. Pods resolve them to the registry mirror Service (nodedns.go), so
// policy-server pulls ghcr.io's policies from the local registry too.
var mirroredRegistries = []string{"docker.io", "registry.k8s.io", "ghcr.io"}

// writeNodeConfig writes the kubelet's, containerd's, CNI's and CoreDNS's
// configuration to config.dir.
func writeNodeConfig(cp *controlPlane, config realNodeConfig, cgroupRoot string) error {
	dir := config.dir
	if err := writeKubeletKubeconfig(cp, filepath.Join(dir, "kubelet.kubeconfig")); err != nil {
		return err
	}
	if err := writeKubeletConfig(filepath.Join(dir, "kubelet.yaml"), cp.ca.certPath(), cgroupRoot, dir); err != nil {
		return err
	}
	if err := writeTemplate(filepath.Join(dir, "containerd.toml"), containerdConfig, map[string]any{
		"Dir": dir, "Sandbox": sandboxImage,
	}); err != nil {
		return err
	}
	for _, registry := range mirroredRegistries {
		if err := writeRegistryHost(filepath.Join(dir, "certs.d", registry), config.registry); err != nil {
			return err
		}
	}
	if err := writeCNIConfig(filepath.Join(dir, "cni")); err != nil {
		return err
	}
	if err := writeKubeProxyConfig(filepath.Join(dir, "kube-proxy.yaml"), cp.kubeconfig); err != nil {
		return err
	}
	return writeCorefile(filepath.Join(dir, "Corefile"), cp.kubeconfig)
}

// writeKubeProxyConfig: kube-proxy in iptables mode, in the suite's network
// namespace, for the real node. Every Service connection is masqueraded, so
// a pod reaching another pod on the bridge through a ClusterIP gets its
// answer back through the node (the bridge would deliver it directly, past
// the translation). Conntrack's host-wide limits are left as they are.
func writeKubeProxyConfig(path, kubeconfig string) error {
	config := map[string]any{
		"apiVersion":       "kubeproxy.config.k8s.io/v1alpha1",
		"kind":             "KubeProxyConfiguration",
		"clientConnection": map[string]any{"kubeconfig": kubeconfig},
		"hostnameOverride": realNodeName,
		"mode":             "iptables",
		"clusterCIDR":      realPodCIDR,
		"iptables":         map[string]any{"masqueradeAll": true},
		"conntrack": map[string]any{
			"maxPerCore": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s",
		},
	}
	out, err := yaml.Marshal(config)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

// writeKubeletKubeconfig: the kubelet authenticates as system:node:<name> in
// system:nodes, which the Node authorizer lets manage its node and pods.
func writeKubeletKubeconfig(cp *controlPlane, path string) error {
	credentials, err := cp.ca.issue("kubelet", "system:node:"+realNodeName, []string{"system:nodes"}, nil, nil)
	if err != nil {
		return err
	}
	config := clientcmdapi.NewConfig()
	config.Clusters["e2e"] = &clientcmdapi.Cluster{Server: cp.server, CertificateAuthorityData: cp.ca.certPEM()}
	config.AuthInfos["kubelet"] = &clientcmdapi.AuthInfo{ClientCertificateData: credentials.certPEM, ClientKeyData: credentials.keyPEM}
	config.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "kubelet"}
	config.CurrentContext = "e2e"
	return clientcmd.WriteToFile(*config, path)
}

// writeKubeletConfig: cgroup v1 through cgroupfs under its own root; the API
// server's client certificate verified against the cluster CA and its
// requests authorized by SubjectAccessReview; cluster DNS; the node's taint;
// pod logs kept in dir after teardown; no eviction thresholds (the node's
// filesystems are tmpfs and the host's disk, not the node's to guard); pods
// synced every 10 s (default 1 min), so that a changed Secret reaches their
// volumes within seconds: the suite waits on that sync.
func writeKubeletConfig(path, clientCA, cgroupRoot, dir string) error {
	no, yes := false, true
	zero := int32(0)
	config := kubeletv1beta1.KubeletConfiguration{
		TypeMeta:                 metav1.TypeMeta{APIVersion: "kubelet.config.k8s.io/v1beta1", Kind: "KubeletConfiguration"},
		FailCgroupV1:             &no,
		CgroupDriver:             "cgroupfs",
		CgroupRoot:               cgroupRoot,
		ContainerRuntimeEndpoint: "unix:///run/containerd/containerd.sock",
		Address:                  nodeIP,
		ReadOnlyPort:             0,
		HealthzPort:              &zero,
		Authentication: kubeletv1beta1.KubeletAuthentication{
			X509:      kubeletv1beta1.KubeletX509Authentication{ClientCAFile: clientCA},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: &yes},
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: &no},
		},
		Authorization:                kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeWebhook},
		ClusterDNS:                   []string{dnsServiceIP},
		ClusterDomain:                clusterDomain,
		ResolverConfig:               ptrTo(""),
		RegisterWithTaints:           []corev1.Taint{{Key: realNodeTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		PodLogsDir:                   filepath.Join(dir, "pods"),
		VolumePluginDir:              "/var/lib/kubelet/volumeplugins",
		FailSwapOn:                   &no,
		EvictionHard:                 map[string]string{"memory.available": "0%", "nodefs.available": "0%", "imagefs.available": "0%", "nodefs.inodesFree": "0%"},
		MergeDefaultEvictionSettings: &no,
		ImageGCHighThresholdPercent:  ptrTo(int32(100)),
		SyncFrequency:                metav1.Duration{Duration: 10 * time.Second},
	}
	out, err := yaml.Marshal(config)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

// writeRegistryHost makes containerd pull a registry's images from the local
// registry over plain HTTP (containerd's hosts.toml).
func writeRegistryHost(dir, registry string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	server := "http://" + registry
	hosts := "server = \"" + server + "\"\n\n[host.\"" + server + "\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
	return os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(hosts), 0o644)
}

// writeCNIConfig: pods on the node's bridge, addresses from realPodCIDR,
// the bridge's address as their gateway and default route.
func writeCNIConfig(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	config := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "e2e",
		"plugins": []any{map[string]any{
			"type":        "bridge",
			"bridge":      nodeBridge,
			"isGateway":   true,
			"hairpinMode": true,
			"ipam": map[string]any{
				"type":   "host-local",
				"ranges": []any{[]any{map[string]any{"subnet": realPodCIDR, "gateway": nodeIP}}},
				"routes": []any{map[string]any{"dst": "0.0.0.0/0"}},
			},
		}},
	}
	out, err := json.MarshalIndent(config, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "10-e2e.conflist"), out, 0o644)
}

// writeCorefile: CoreDNS on the kube-dns Service's address answers
// cluster.local (Services, and pods by the hostname and subdomain the
// EndpointSlices carry) and the reverse zones from the API server, and
// each mirrored registry's name with the registry mirror's ClusterIP.
func writeCorefile(path, kubeconfig string) error {
	hosts := ""
	for _, registry := range mirroredRegistries {
		hosts += "        " + registryMirrorIP + " " + registry + "\n"
	}
	corefile := ".:53 {\n" +
		"    bind " + dnsServiceIP + "\n" +
		"    errors\n" +
		"    log\n" +
		"    hosts {\n" + hosts + "        fallthrough\n    }\n" +
		"    kubernetes " + clusterDomain + " in-addr.arpa ip6.arpa {\n" +
		"        kubeconfig " + kubeconfig + " e2e\n" +
		"        pods verified\n" +
		"    }\n" +
		"}\n"
	return os.WriteFile(path, []byte(corefile), 0o644)
}
