//go:build !linux

package local

import (
	"errors"
	"os"
	"os/exec"

	"github.com/proctor-evals/proctor/sandbox"
)

// Outside Linux the driver forks by plain copy and isolates nothing but
// the file API: commands are plain child processes, in their own process
// group, that do not die with the caller.

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
func mountTmpfs(string, int64) error                        { return errors.New("tmpfs: Linux only") }
func unmount(string) error                                  { return nil }
func reflink(_, _ *os.File) error                           { return errors.New("reflink: Linux only") }
func newNetns() (*netns, error)                             { return nil, errors.New("Linux only") }
func newCgroup(cgroupMode, sandbox.Limits) (*cgroup, error) { return nil, errors.New("Linux only") }

const nonblock = 0

type netns struct{ fd int } // never made: newNetns fails

func (*netns) close() {}

type cgroup struct{}

func (*cgroup) remove()         {}
func (*cgroup) oomKills() int64 { return 0 }

func (b *box) start(c *exec.Cmd) (*process, error) {
	if err := startRetrying(c); err != nil {
		return nil, err
	}
	p := &process{done: make(chan struct{})}
	go func() { c.Wait(); close(p.done) }()
	return p, nil
}

func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}

func makeRunDir(dir string) (string, error) {
	return os.MkdirTemp(dir, "run-")
}

// sweep does nothing outside Linux: there is no cheap liveness check that
// tells a dead run's directory from a live one's.
func sweep(string) error { return nil }
