package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"k8s.io/klog/v2"
)

// kubeletSysctls are the host-wide settings the kubelet writes at start
// (its container manager's kernel tunables), whatever the host had.
var kubeletSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// The sysctls belong to the host, and real nodes may run on it at once (the
// node suite runs two, each in its own network namespace): the first node
// to start saves them, the last to stop writes them back. Each running node
// holds a file named after its process in sysctlsDir; one whose process is
// gone (killed before its teardown) holds them no more.
const (
	savedSysctls = "saved"
	holderPrefix = "holder-"
)

func sysctlsDir() string { return filepath.Join(os.TempDir(), "e2e-node-sysctls") }

// holdSysctls registers this process as a node of the host; the first one
// saves the sysctls.
func holdSysctls() error {
	return withSysctlsLock(func(dir string) error {
		if len(liveHolders(dir)) == 0 {
			var saved strings.Builder
			for _, name := range kubeletSysctls {
				value, err := os.ReadFile(filepath.Join("/proc/sys", name))
				if err != nil {
					return err
				}
				fmt.Fprintf(&saved, "%s=%s\n", name, strings.TrimSpace(string(value)))
			}
			if err := os.WriteFile(filepath.Join(dir, savedSysctls), []byte(saved.String()), 0o644); err != nil {
				return err
			}
		}
		return os.WriteFile(filepath.Join(dir, holderPrefix+strconv.Itoa(os.Getpid())), nil, 0o644)
	})
}

// releaseSysctls: this process holds them no more; the last holder writes
// back every sysctl that changed.
func releaseSysctls() {
	err := withSysctlsLock(func(dir string) error {
		if err := os.Remove(filepath.Join(dir, holderPrefix+strconv.Itoa(os.Getpid()))); err != nil {
			return err
		}
		if others := liveHolders(dir); len(others) > 0 {
			klog.InfoS("sysctls left to the real nodes still running", "pids", others)
			return nil
		}
		saved, err := os.ReadFile(filepath.Join(dir, savedSysctls))
		if err != nil {
			return err
		}
		for _, line := range strings.Fields(string(saved)) {
			name, value, _ := strings.Cut(line, "=")
			path := filepath.Join("/proc/sys", name)
			if now, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(now)) == value {
				continue
			}
			if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
				klog.ErrorS(err, "restoring a sysctl", "name", name, "value", value)
			} else {
				klog.InfoS("sysctl restored", "name", name, "value", value)
			}
		}
		return os.Remove(filepath.Join(dir, savedSysctls))
	})
	if err != nil {
		klog.ErrorS(err, "restoring the sysctls")
	}
}

// withSysctlsLock runs f on sysctlsDir, holding its lock.
func withSysctlsLock(f func(dir string) error) error {
	dir := sysctlsDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close() // releases the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	return f(dir)
}

// liveHolders are the processes holding the sysctls; the files of those
// gone are removed.
func liveHolders(dir string) []int {
	entries, _ := os.ReadDir(dir)
	var pids []int
	for _, entry := range entries {
		pid, err := strconv.Atoi(strings.TrimPrefix(entry.Name(), holderPrefix))
		if !strings.HasPrefix(entry.Name(), holderPrefix) || err != nil {
			continue
		}
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			_ = os.Remove(filepath.Join(dir, entry.Name()))
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}
