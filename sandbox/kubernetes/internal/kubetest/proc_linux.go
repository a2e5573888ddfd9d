package kubetest

import "syscall"

// deathSignal kills a child when the test binary dies, even by SIGKILL.
func deathSignal() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
