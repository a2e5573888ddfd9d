package local

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proctor-evals/proctor/sandbox"
)

type cgroupMode int

const (
	cgroupNone cgroupMode = iota
	cgroupV1
	cgroupV2
)

// isolation is what the host lets this process enforce.
type isolation struct {
	root   bool // root with working namespaces: PID and network isolation
	cgroup cgroupMode
}

const cgroupRoot = "/sys/fs/cgroup"

func probeIsolation() isolation {
	var iso isolation
	if os.Geteuid() != 0 {
		return iso
	}
	ns, err := newNetns()
	if err != nil {
		return iso
	}
	ns.close()
	iso.root = true
	iso.cgroup = probeCgroup()
	return iso
}

func probeCgroup() cgroupMode {
	if b, err := os.ReadFile(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		// Pure cgroup v2: our leaves live under /sys/fs/cgroup/proctor,
		// which needs the controllers enabled for its children.
		have := strings.Fields(string(b))
		for _, c := range []string{"cpu", "memory", "pids"} {
			if !contains(have, c) {
				return cgroupNone
			}
		}
		parent := filepath.Join(cgroupRoot, "proctor")
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return cgroupNone
		}
		for _, d := range []string{cgroupRoot, parent} {
			if err := os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte("+cpu +memory +pids"), 0); err != nil {
				return cgroupNone
			}
		}
		return cgroupV2
	}
	for _, c := range []string{"cpu", "memory", "pids"} {
		if err := os.MkdirAll(filepath.Join(cgroupRoot, c, "proctor"), 0o755); err != nil {
			return cgroupNone
		}
	}
	return cgroupV1
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// --- fork methods ---

func probeOverlay(dir string) bool {
	if os.Geteuid() != 0 {
		return false
	}
	d, err := os.MkdirTemp(dir, "probe-")
	if err != nil {
		return false
	}
	defer os.RemoveAll(d)
	lower := filepath.Join(d, "lower")
	if os.Mkdir(lower, 0o755) != nil || os.WriteFile(filepath.Join(lower, "f"), []byte("x"), 0o644) != nil {
		return false
	}
	ws := filepath.Join(d, "ws")
	if mountOverlay(lower, d, ws) != nil {
		return false
	}
	defer unmount(ws)
	b, err := os.ReadFile(filepath.Join(ws, "f"))
	return err == nil && string(b) == "x"
}

// mountOverlay mounts at ws a copy-on-write view of lower, keeping the
// fork's writes in dir/upper.
func mountOverlay(lower, dir, ws string) error {
	upper, work := filepath.Join(dir, "upper"), filepath.Join(dir, "work")
	for _, d := range []string{upper, work, ws} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work)
	if err := unix.Mount("overlay", ws, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount overlay: %w", err)
	}
	return nil
}

func unmount(ws string) error {
	if err := unix.Unmount(ws, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("local: unmount: %w", err)
	}
	return nil
}

func probeReflink(dir string) bool {
	d, err := os.MkdirTemp(dir, "probe-")
	if err != nil {
		return false
	}
	defer os.RemoveAll(d)
	src := filepath.Join(d, "a")
	if os.WriteFile(src, []byte("x"), 0o644) != nil {
		return false
	}
	return copyFile(src, filepath.Join(d, "b"), 0o644, true) == nil
}

func reflink(dst, src *os.File) error {
	return unix.IoctlFileClone(int(dst.Fd()), int(src.Fd()))
}

// --- network namespace ---

// netns is a network namespace with only loopback, shared by the commands
// of one sandbox.
type netns struct{ fd int }

func newNetns() (*netns, error) {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// Never unlocked: this thread leaves the host's network namespace,
		// so Go must discard it when the goroutine ends.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ch <- result{-1, err}
			return
		}
		if err := loopbackUp(); err != nil {
			ch <- result{-1, err}
			return
		}
		fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		ch <- result{fd, err}
	}()
	r := <-ch
	if r.err != nil {
		return nil, r.err
	}
	return &netns{fd: r.fd}, nil
}

func loopbackUp() error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP | unix.IFF_RUNNING)
	return unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr)
}

func (n *netns) close() {
	if n != nil {
		unix.Close(n.fd)
	}
}

// --- cgroups ---

type cgroup struct {
	mode cgroupMode
	dirs []string
	fd   int // v2: the leaf, for SysProcAttr.CgroupFD
}

var cgroupSeq atomic.Int64

func newCgroup(mode cgroupMode, l sandbox.Limits) (*cgroup, error) {
	name := fmt.Sprintf("%d-%d", os.Getpid(), cgroupSeq.Add(1))
	cg := &cgroup{mode: mode, fd: -1}
	type setting struct{ ctrl, file, value string }
	var settings []setting
	const period = 100000 // µs
	switch mode {
	case cgroupV2:
		if l.MemoryBytes > 0 {
			settings = append(settings, setting{"", "memory.max", strconv.FormatInt(l.MemoryBytes, 10)},
				setting{"", "memory.swap.max", "0"})
		}
		if l.Pids > 0 {
			settings = append(settings, setting{"", "pids.max", strconv.FormatInt(l.Pids, 10)})
		}
		if l.CPUs > 0 {
			settings = append(settings, setting{"", "cpu.max", fmt.Sprintf("%d %d", int64(l.CPUs*period), period)})
		}
		dir := filepath.Join(cgroupRoot, "proctor", name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, err
		}
		cg.dirs = []string{dir}
	case cgroupV1:
		if l.MemoryBytes > 0 {
			settings = append(settings, setting{"memory", "memory.limit_in_bytes", strconv.FormatInt(l.MemoryBytes, 10)})
		}
		if l.Pids > 0 {
			settings = append(settings, setting{"pids", "pids.max", strconv.FormatInt(l.Pids, 10)})
		}
		if l.CPUs > 0 {
			settings = append(settings, setting{"cpu", "cpu.cfs_period_us", strconv.Itoa(period)},
				setting{"cpu", "cpu.cfs_quota_us", strconv.FormatInt(int64(l.CPUs*period), 10)})
		}
	default:
		return nil, errors.New("no cgroups")
	}
	for _, s := range settings {
		dir := filepath.Join(cgroupRoot, s.ctrl, "proctor", name)
		if mode == cgroupV1 && !contains(cg.dirs, dir) {
			if err := os.Mkdir(dir, 0o755); err != nil {
				cg.remove()
				return nil, err
			}
			cg.dirs = append(cg.dirs, dir)
		}
		if err := os.WriteFile(filepath.Join(dir, s.file), []byte(s.value), 0); err != nil && s.file != "memory.swap.max" {
			cg.remove()
			return nil, err
		}
	}
	if mode == cgroupV2 {
		fd, err := unix.Open(cg.dirs[0], unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			cg.remove()
			return nil, err
		}
		cg.fd = fd
	}
	return cg, nil
}

// join moves one thread (v1 allows it) into the cgroup: a process forked
// from that thread starts inside it, so no child escapes by forking early.
func (cg *cgroup) join(tid int) error {
	for _, d := range cg.dirs {
		if err := os.WriteFile(filepath.Join(d, "tasks"), []byte(strconv.Itoa(tid)), 0); err != nil {
			return err
		}
	}
	return nil
}

func (cg *cgroup) remove() {
	if cg == nil {
		return
	}
	if cg.fd >= 0 {
		unix.Close(cg.fd)
	}
	for _, d := range cg.dirs {
		// Killed processes leave the cgroup asynchronously.
		for i := 0; i < 100 && os.Remove(d) != nil; i++ {
			if _, err := os.Stat(d); err != nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// --- processes ---

// start starts c in its own process group and, when we may, in a new PID
// namespace, in the sandbox's network namespace and in its cgroup.
func (b *box) start(c *exec.Cmd) error {
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if b.iso.root {
		c.SysProcAttr.Cloneflags = syscall.CLONE_NEWPID
	}
	if b.cg != nil && b.cg.mode == cgroupV2 {
		c.SysProcAttr.UseCgroupFD = true
		c.SysProcAttr.CgroupFD = b.cg.fd
	}
	if b.ns == nil && (b.cg == nil || b.cg.mode != cgroupV1) {
		return c.Start()
	}
	// A child inherits the network namespace and (v1) cgroups of the
	// thread that forks it: fork from a dedicated thread moved there.
	ch := make(chan error, 1)
	go func() {
		// Never unlocked: the thread has left the host's namespace and
		// cgroup, so Go must discard it when the goroutine ends.
		runtime.LockOSThread()
		if b.ns != nil {
			if err := unix.Setns(b.ns.fd, unix.CLONE_NEWNET); err != nil {
				ch <- err
				return
			}
		}
		if b.cg != nil && b.cg.mode == cgroupV1 {
			if err := b.cg.join(unix.Gettid()); err != nil {
				ch <- err
				return
			}
		}
		ch <- c.Start()
	}()
	return <-ch
}

// killGroup kills a command's process group. The command leads it (and,
// in a PID namespace, is its init, whose death kills the namespace).
func killGroup(pgid int) {
	unix.Kill(-pgid, unix.SIGKILL)
}
