package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

// hostState is what the node changes outside its namespaces, to be undone:
// the bridge and service addresses in the suite's network namespace, the
// kubelet's cgroup root in every hierarchy, the sysctls it writes (shared
// with the host's other real nodes: holdSysctls).
type hostState struct {
	cgroupRoot string
	// cgroupDirs are the cgroup root's directories, one per hierarchy.
	cgroupDirs []string
	addresses  [][]string
}

// prepareHost holds the sysctls (holdSysctls), adds the bridge and the
// service addresses, and creates the kubelet's cgroup root; on error it
// undoes what it did.
func prepareHost(dir string) (*hostState, error) {
	if err := holdSysctls(); err != nil {
		return nil, err
	}
	host := &hostState{cgroupRoot: fmt.Sprintf("/e2e-node-%d", os.Getpid())}
	err := host.addNetwork()
	if err == nil {
		err = host.createCgroups()
	}
	if err != nil {
		host.restore()
		return nil, err
	}
	return host, nil
}

// addNetwork: the bridge with the node's IP (the pods' gateway; the kernel
// here has no dummy links), the Service addresses pods reach directly, the
// Services' range routed to the bridge (kube-proxy translates what is
// served), and forwarding on.
func (h *hostState) addNetwork() error {
	if err := ip("link", "add", nodeBridge, "type", "bridge"); err != nil {
		return err
	}
	h.addresses = append(h.addresses, []string{"link", "del", nodeBridge})
	prefix := strings.Split(realPodCIDR, "/")[1]
	for _, command := range [][]string{
		{"addr", "add", nodeIP + "/" + prefix, "dev", nodeBridge},
		{"link", "set", nodeBridge, "up"},
		{"addr", "add", kubernetesServiceIP + "/32", "dev", "lo"},
		{"addr", "add", dnsServiceIP + "/32", "dev", "lo"},
		{"route", "add", serviceClusterIPRange, "dev", nodeBridge},
	} {
		if err := ip(command...); err != nil {
			return err
		}
		if command[1] == "add" {
			h.addresses = append(h.addresses, []string{command[0], "del", command[2], "dev", command[4]})
		}
	}
	// kube-proxy forwards ClusterIP traffic between pods on the bridge; the
	// setting belongs to the suite's network namespace, gone with it.
	return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// createCgroups creates the kubelet's cgroup root in every cgroup v1
// hierarchy (cgroupfs driver), with the parent's cpus and memory nodes.
func (h *hostState) createCgroups() error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, mount := range mounts {
		dir := filepath.Join(mount, h.cgroupRoot)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		h.cgroupDirs = append(h.cgroupDirs, dir)
		for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
			value, err := os.ReadFile(filepath.Join(mount, file))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, file), value, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// cgroupMounts are the mount points of the cgroup hierarchies, v1 and v2.
func cgroupMounts() ([]string, error) {
	file, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer file.Close()
	var mounts []string
	scanner := bufio.NewScanner(file)
	for scanner.Scan() {
		// ID parent major:minor root mount-point options [optional...] - type source super-options
		fields := strings.Fields(scanner.Text())
		separator := slices.Index(fields, "-")
		if separator > 4 && separator+1 < len(fields) && (fields[separator+1] == "cgroup" || fields[separator+1] == "cgroup2") {
			mounts = append(mounts, fields[4])
		}
	}
	return mounts, scanner.Err()
}

// restore removes the cgroups (once their processes are gone), the
// addresses and the bridge, and lets go of the sysctls (the last node
// out writes back those that changed).
func (h *hostState) restore() {
	for _, dir := range h.cgroupDirs {
		if err := removeCgroup(dir); err != nil {
			klog.ErrorS(err, "removing the real node's cgroup", "dir", dir)
		}
	}
	for i := len(h.addresses) - 1; i >= 0; i-- {
		if err := ip(h.addresses[i]...); err != nil {
			klog.ErrorS(err, "removing the real node's network")
		}
	}
	releaseSysctls()
}

// removeCgroup removes a cgroup and its children, deepest first, retrying
// for 10 s while the kernel still releases exited tasks.
func removeCgroup(root string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var dirs []string
		err := filepath.WalkDir(root, func(path string, entry fs.DirEntry, err error) error {
			if err == nil && entry.IsDir() {
				dirs = append(dirs, path)
			}
			return err
		})
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err == nil {
			slices.Reverse(dirs)
			for _, dir := range dirs {
				if err = os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
					break
				}
				err = nil
			}
		}
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
