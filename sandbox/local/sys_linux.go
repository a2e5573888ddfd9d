package local

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
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

// oomKills is how many processes of the cgroup the out-of-memory killer
// has ended: memory.events (v2) or memory.oom_control (v1), line
// "oom_kill N". Without a memory controller, or on a kernel that does
// not count them, it is 0.
func (cg *cgroup) oomKills() int64 {
	if cg == nil {
		return 0
	}
	file := "memory.events"
	if cg.mode == cgroupV1 {
		file = "memory.oom_control"
	}
	for _, d := range cg.dirs {
		if cg.mode == cgroupV1 && filepath.Base(filepath.Dir(filepath.Dir(d))) != "memory" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, file))
		if err != nil {
			return 0
		}
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "oom_kill "); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
	}
	return 0
}

// join moves one thread (v1 allows it) into the cgroup: a process forked
// from that thread starts inside it, so no child escapes by forking early.
// It returns the cgroups the thread was in, for leave.
func (cg *cgroup) join(tid int) (home []string, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/cgroup", tid))
	if err != nil {
		return nil, err
	}
	for _, d := range cg.dirs {
		ctrl := filepath.Base(filepath.Dir(filepath.Dir(d))) // <root>/<ctrl>/proctor/<name>
		dir := ""
		for line := range strings.Lines(string(b)) { // "4:memory:/path"
			f := strings.SplitN(strings.TrimSpace(line), ":", 3)
			if len(f) == 3 && contains(strings.Split(f[1], ","), ctrl) {
				dir = filepath.Join(cgroupRoot, ctrl, f[2])
			}
		}
		if dir == "" {
			return nil, fmt.Errorf("no %s cgroup in /proc/self/task/%d/cgroup", ctrl, tid)
		}
		home = append(home, dir)
	}
	for _, d := range cg.dirs {
		if err := os.WriteFile(filepath.Join(d, "tasks"), []byte(strconv.Itoa(tid)), 0); err != nil {
			return nil, err
		}
	}
	return home, nil
}

// leave moves the thread back to its cgroups once the command is forked:
// while it is in the command's, the OOM killer of the command's memory
// limit weighs the whole engine too, and picks it, the process with the
// most memory (eval's tests were "signal: killed" so, the test binary
// killed in a sandbox's cgroup).
func leave(tid int, home []string) error {
	for _, d := range home {
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

// start starts c in its own process group, with SIGKILL as its parent-death
// signal and, when we may, in a new PID namespace, in the sandbox's network
// namespace and in its cgroup.
func (b *box) start(c *exec.Cmd) (*process, error) {
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if b.iso.root {
		c.SysProcAttr.Cloneflags = syscall.CLONE_NEWPID
	}
	if b.cg != nil && b.cg.mode == cgroupV2 {
		c.SysProcAttr.UseCgroupFD = true
		c.SysProcAttr.CgroupFD = b.cg.fd
	}
	p := &process{done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// The parent-death signal fires when the thread that forked the
		// child exits, not the process: this goroutine keeps its thread
		// until the child is waited for. A thread moved into the sandbox's
		// network namespace or (v1) cgroup, where a child inherits them
		// from, is never unlocked: Go discards it when the goroutine ends.
		runtime.LockOSThread()
		clean := true
		defer func() {
			if clean {
				runtime.UnlockOSThread()
			}
		}()
		if b.ns != nil {
			clean = false
			if err := unix.Setns(b.ns.fd, unix.CLONE_NEWNET); err != nil {
				started <- err
				return
			}
		}
		var home []string
		if b.cg != nil && b.cg.mode == cgroupV1 {
			clean = false
			var err error
			if home, err = b.cg.join(unix.Gettid()); err != nil {
				started <- err
				return
			}
		}
		if err := startRetrying(c); err != nil {
			started <- err
			return
		}
		if err := leave(unix.Gettid(), home); err != nil {
			killGroup(c.Process.Pid)
			c.Wait()
			close(p.done)
			started <- fmt.Errorf("local: leaving the command's cgroup: %w", err)
			return
		}
		started <- nil
		c.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// killGroup kills a command's process group. The command leads it (and,
// in a PID namespace, is its init, whose death kills the namespace).
func killGroup(pgid int) {
	unix.Kill(-pgid, unix.SIGKILL)
}

// nonblock opens FIFOs without waiting for the other end.
const nonblock = syscall.O_NONBLOCK

// mountTmpfs mounts at dir a tmpfs of size bytes: a fork's disk limit.
func mountTmpfs(dir string, size int64) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		return fmt.Errorf("mount tmpfs: %w", err)
	}
	return nil
}

// --- what dead runs left ---

// A driver's directory inside Options.Dir is "run-PID-START": START is the
// process's start time in clock ticks since boot, so that a reused pid is
// not taken for the process that died.
const runPrefix = "run-"

func procStart(pid int) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	// The command name (field 2) may hold spaces and parentheses: fields
	// are counted after its closing parenthesis.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", false
	}
	return f[19], true // field 22: starttime
}

func makeRunDir(dir string) (string, error) {
	start, ok := procStart(os.Getpid())
	if !ok {
		start = "0"
	}
	run := filepath.Join(dir, fmt.Sprintf("%s%d-%s", runPrefix, os.Getpid(), start))
	if err := os.MkdirAll(run, 0o755); err != nil {
		return "", err
	}
	return run, nil
}

// alive reports whether the run named name ("run-PID-START") is a live
// process.
func alive(name string) bool {
	pidStr, start, ok := strings.Cut(strings.TrimPrefix(name, runPrefix), "-")
	pid, err := strconv.Atoi(pidStr)
	if !ok || err != nil {
		return true // not ours to judge
	}
	got, ok := procStart(pid)
	return ok && (got == start || start == "0")
}

// sweep removes what dead runs left in dir: mounts first (removing a
// mounted overlay's tree would delete through it), then directories, then
// cgroups of dead processes.
func sweep(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("local: cleanup: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), runPrefix) || alive(e.Name()) {
			continue
		}
		run := filepath.Join(dir, e.Name())
		if err := unmountUnder(run); err != nil {
			errs = append(errs, err)
			continue // never remove through a mount
		}
		if err := os.RemoveAll(run); err != nil {
			errs = append(errs, err)
		}
	}
	sweepCgroups()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("local: cleanup: %w", err)
	}
	return nil
}

// unmountUnder unmounts every mount at or below dir, deepest first.
func unmountUnder(dir string) error {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil // no procfs: nothing we could have mounted either
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	var mounts []string
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if mp == abs || strings.HasPrefix(mp, abs+"/") {
			mounts = append(mounts, mp)
		}
	}
	// Deepest first: a longer path is never an ancestor of a shorter one.
	slices.SortFunc(mounts, func(a, b string) int { return len(b) - len(a) })
	var errs []error
	for _, m := range mounts {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space…).
func unescapeMount(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// sweepCgroups removes the cgroups of processes that are gone (they are
// named "PID-N").
func sweepCgroups() {
	for _, parent := range []string{
		filepath.Join(cgroupRoot, "proctor"),
		filepath.Join(cgroupRoot, "cpu", "proctor"),
		filepath.Join(cgroupRoot, "memory", "proctor"),
		filepath.Join(cgroupRoot, "pids", "proctor"),
	} {
		entries, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, e := range entries {
			pidStr, _, ok := strings.Cut(e.Name(), "-")
			pid, err := strconv.Atoi(pidStr)
			if !ok || err != nil || unix.Kill(pid, 0) == nil {
				continue
			}
			os.Remove(filepath.Join(parent, e.Name()))
		}
	}
}
