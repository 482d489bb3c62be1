package main

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// probeReadiness runs the container's readiness probe as the kubelet's
// prober does, until ctx ends: after initialDelaySeconds, every
// periodSeconds; the pod turns ready after successThreshold successes in a
// row and unready after failureThreshold failures in a row (it starts
// unready). Without a probe the container is ready once started. Only
// httpGet probes are run.
func (r *podRuntime) probeReadiness(ctx context.Context, pod *corev1.Pod, container *corev1.Container) {
	probe := container.ReadinessProbe
	if probe == nil {
		r.setReady(ctx, pod, true)
		return
	}
	if probe.HTTPGet == nil {
		klog.ErrorS(nil, "only httpGet readiness probes are run: the pod stays unready", "pod", klog.KObj(pod))
		return
	}
	target, err := probeURL(pod, container, probe.HTTPGet)
	if err != nil {
		klog.ErrorS(err, "readiness probe", "pod", klog.KObj(pod))
		return
	}
	headers := http.Header{"User-Agent": {"kube-probe/e2e"}}
	for _, header := range probe.HTTPGet.HTTPHeaders {
		headers.Add(header.Name, header.Value)
	}
	// The API server defaults every field (period 10 s, timeout 1 s,
	// thresholds 1 and 3).
	second := func(n int32) time.Duration { return time.Duration(n) * time.Second }
	client := &http.Client{
		Timeout: second(probe.TimeoutSeconds),
		// The kubelet does not verify a probed server's certificate.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true},
	}
	select {
	case <-time.After(second(probe.InitialDelaySeconds)):
	case <-ctx.Done():
		return
	}
	ticker := time.NewTicker(second(probe.PeriodSeconds))
	defer ticker.Stop()
	ready, streak := false, 0
	for {
		ok := httpProbe(ctx, client, target, headers)
		if ok == ready {
			streak = 0
		} else if streak++; (ok && streak >= int(probe.SuccessThreshold)) || (!ok && streak >= int(probe.FailureThreshold)) {
			ready, streak = ok, 0
			if ctx.Err() == nil {
				r.setReady(ctx, pod, ready)
			}
		}
		select {
		case <-ticker.C:
		case <-ctx.Done():
			return
		}
	}
}

// probeURL is where an httpGet probe goes: the pod's IP unless it names a host.
func probeURL(pod *corev1.Pod, container *corev1.Container, get *corev1.HTTPGetAction) (string, error) {
	port, err := containerPort(container, get.Port)
	if err != nil {
		return "", err
	}
	host := get.Host
	if host == "" {
		host = pod.Status.PodIP
	}
	scheme := strings.ToLower(string(get.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	target := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: get.Path}
	return target.String(), nil
}

// httpProbe succeeds on a status from 200 to 399, as the kubelet's does.
func httpProbe(ctx context.Context, client *http.Client, target string, headers http.Header) bool {
	request, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return false
	}
	request.Header = headers
	response, err := client.Do(request)
	if err != nil {
		return false
	}
	response.Body.Close()
	return response.StatusCode >= 200 && response.StatusCode < 400
}
