//go:build !linux

package kubetest

import "syscall"

// deathSignal: only Linux has a parent death signal; elsewhere a killed
// test binary leaves its control plane running.
func deathSignal() *syscall.SysProcAttr { return nil }
