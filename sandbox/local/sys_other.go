//go:build !linux

package local

import (
	"errors"
	"os"
	"os/exec"

	"github.com/proctor-evals/proctor/sandbox"
)

// Outside Linux the driver forks by plain copy and isolates nothing but
// the file API: commands are plain child processes.

type cgroupMode int

const cgroupNone cgroupMode = 0

type isolation struct {
	root   bool
	cgroup cgroupMode
}

func probeIsolation() isolation                             { return isolation{} }
func probeOverlay(string) bool                              { return false }
func probeReflink(string) bool                              { return false }
func mountOverlay(_, _, _ string) error                     { return errors.New("overlay: Linux only") }
func unmount(string) error                                  { return nil }
func reflink(_, _ *os.File) error                           { return errors.New("reflink: Linux only") }
func (b *box) start(c *exec.Cmd) error                      { return c.Start() }
func killGroup(pid int)                                     { killProcess(pid) }
func newNetns() (*netns, error)                             { return nil, errors.New("Linux only") }
func newCgroup(cgroupMode, sandbox.Limits) (*cgroup, error) { return nil, errors.New("Linux only") }

type netns struct{}

func (*netns) close() {}

type cgroup struct{}

func (*cgroup) remove() {}

func killProcess(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}
