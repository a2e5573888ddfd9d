// Package sandboxtest checks that a sandbox driver keeps the contract of
// package sandbox, in the manner of testing/slogtest and testing/fstest,
// and provides [Fake], an in-memory driver for unit tests.
//
// The suite runs against the portable [sandbox.Provider] over the driver,
// so it checks the driver and the portable type together. A driver runs it
// from its own tests:
//
//	func TestConformance(t T) {
//		sandboxtest.Run(t, mydriver.New(nil), nil)
//	}
//
// or, outside a test, with [TestProvider], which returns the failures as an
// error.
//
// The suite assumes the sandbox has a POSIX sh and busybox-like tools on
// its PATH: sh, cat, echo, env, sleep, mkdir, rm, head, tr. It needs no
// other host tool: where a case needs a network client, a FIFO, a sparse
// file or endless output, it builds a small Go program (testdata/probe,
// embedded) with the go command, writes it into the sandbox and runs it.
// A provider without a shell (like [Fake]) declares it with
// Options.Without [Shell]; one that cannot run the probe (a Linux binary
// of the host's architecture), with [Binaries]. Resource-limit and network
// cases run only for what the provider guarantees
// ([sandbox.Provider.Guarantees]); a provider that guarantees nothing skips
// them, and a provider that claims a guarantee it does not keep fails.
package sandboxtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/proctor-evals/proctor/sandbox"
)

// Feature is a capability some cases need and a provider may lack.
type Feature string

const (
	// Shell: commands are real processes, with sh and busybox-like tools
	// on PATH (see the package documentation).
	Shell Feature = "shell"
	// Binaries: a static executable for the host's OS and architecture,
	// written into the workspace, runs as ./name.
	Binaries Feature = "binaries"
)

// Options configures [Run] and [TestProvider]. The zero value is valid.
type Options struct {
	// Spec is the spec every case starts from (an Image, a PATH in Env,
	// Limits…); each case adds its own Template, Files, Setup, Network and
	// Limits to it.
	Spec sandbox.Spec
	// Without lists features the provider lacks: cases needing them skip.
	Without []Feature
}

// T is the part of testing.T the cases use; [TestProvider] implements it
// without a testing.T.
type T interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	FailNow()
	Logf(format string, args ...any)
	Skipf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

type config struct {
	spec    sandbox.Spec
	without map[Feature]bool
}

func newConfig(opts *Options) config {
	cfg := config{without: map[Feature]bool{}}
	if opts != nil {
		cfg.spec = opts.Spec
		for _, f := range opts.Without {
			cfg.without[f] = true
		}
	}
	return cfg
}

type testCase struct {
	name  string
	rule  string // what the case checks, shown when it fails
	needs []Feature
	// guarantee, when set, says which provider guarantee the case checks;
	// the case skips unless the provider claims it.
	guarantee func(sandbox.Guarantees) bool
	run       func(t T, s *suite)
}

// skip reports why tc does not apply, or "".
func (s *suite) skip(tc testCase) string {
	for _, f := range tc.needs {
		if s.cfg.without[f] {
			return fmt.Sprintf("provider lacks %s", f)
		}
	}
	if tc.guarantee != nil && !tc.guarantee(s.g) {
		return "provider does not claim this guarantee"
	}
	return ""
}

// Run runs the conformance suite against p, one subtest per rule, in
// parallel; opts may be nil.
func Run(t *testing.T, p *sandbox.Provider, opts *Options) {
	s := &suite{p: p, cfg: newConfig(opts), g: p.Guarantees()}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if why := s.skip(tc); why != "" {
				t.Skip(why)
			}
			t.Logf("rule: %s", tc.rule)
			tc.run(t, s)
		})
	}
}

// TestProvider runs the conformance suite against p, concurrently, and
// returns an error naming each rule p breaks, or nil; opts may be nil.
func TestProvider(p *sandbox.Provider, opts *Options) error {
	s := &suite{p: p, cfg: newConfig(opts), g: p.Guarantees()}
	var wg sync.WaitGroup
	errs := make([]error, len(cases))
	for i, tc := range cases {
		if s.skip(tc) != "" {
			continue
		}
		c := &checker{}
		wg.Go(func() {
			done := make(chan struct{})
			go func() {
				defer close(done)
				defer c.cleanup()
				tc.run(c, s)
			}()
			<-done
			if c.failed {
				errs[i] = fmt.Errorf("%s (%s): %s", tc.name, tc.rule, strings.Join(c.msgs, "; "))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sandboxtest: %w", err)
	}
	return nil
}

// checker is a T outside a test: failures are collected, FailNow and
// Skipf end the case's goroutine as testing.T's do.
type checker struct {
	mu       sync.Mutex
	msgs     []string
	failed   bool
	cleanups []func()
}

func (c *checker) Helper() {}
func (c *checker) Errorf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failed = true
	c.msgs = append(c.msgs, strings.TrimSpace(fmt.Sprintf(format, args...)))
}
func (c *checker) Fatalf(format string, args ...any) { c.Errorf(format, args...); runtime.Goexit() }
func (c *checker) FailNow() {
	c.mu.Lock()
	c.failed = true
	c.mu.Unlock()
	runtime.Goexit()
}
func (c *checker) Logf(string, ...any)  {}
func (c *checker) Skipf(string, ...any) { runtime.Goexit() }
func (c *checker) Cleanup(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cleanups = append(c.cleanups, f)
}
func (c *checker) TempDir() string {
	dir, err := os.MkdirTemp("", "sandboxtest-")
	if err != nil {
		c.Fatalf("TempDir: %v", err)
	}
	c.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
func (c *checker) cleanup() {
	for i := len(c.cleanups) - 1; i >= 0; i-- {
		c.cleanups[i]()
	}
}

type suite struct {
	p   *sandbox.Provider
	cfg config
	g   sandbox.Guarantees
}

// spec returns the base spec with mod applied.
func (s *suite) spec(mod func(*sandbox.Spec)) sandbox.Spec {
	sp := s.cfg.spec
	sp.Env = maps.Clone(sp.Env)
	sp.Files = maps.Clone(sp.Files)
	sp.Setup = append([]sandbox.Cmd(nil), sp.Setup...)
	if mod != nil {
		mod(&sp)
	}
	return sp
}

func (s *suite) env(t T, mod func(*sandbox.Spec)) *sandbox.Environment {
	t.Helper()
	env, err := s.p.Provision(ctx(t), s.spec(mod))
	noError(t, err, "Provision")
	t.Cleanup(func() { env.Close() })
	return env
}

func fork(t T, env *sandbox.Environment) *sandbox.Sandbox {
	t.Helper()
	sb, err := env.Fork(ctx(t))
	noError(t, err, "Fork")
	t.Cleanup(func() { sb.Close() })
	return sb
}

func (s *suite) sandbox(t T, mod func(*sandbox.Spec)) *sandbox.Sandbox {
	t.Helper()
	return fork(t, s.env(t, mod))
}

func ctx(t T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func run(t T, sb *sandbox.Sandbox, cmd sandbox.Cmd) sandbox.Result {
	t.Helper()
	res, err := sb.Exec(ctx(t), cmd)
	noError(t, err, "Exec %q", cmd.Args)
	return res
}

func sh(script string) sandbox.Cmd { return sandbox.Cmd{Args: []string{"sh", "-c", script}} }

func write(t T, sb *sandbox.Sandbox, name string, data []byte) {
	t.Helper()
	noError(t, sb.WriteFile(ctx(t), name, data, 0o644), "WriteFile %s", name)
}

func read(t T, sb *sandbox.Sandbox, name string) []byte {
	t.Helper()
	b, err := sb.ReadFile(ctx(t), name)
	noError(t, err, "ReadFile %s", name)
	return b
}

func random(t T, n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// equalBytes compares without dumping megabytes on failure.
func equalBytes(t T, want, got []byte, what string) {
	t.Helper()
	if !bytes.Equal(want, got) {
		n := min(len(got), 200)
		t.Fatalf("%s: got %d bytes (%q…), want %d bytes", what, len(got), got[:n], len(want))
	}
}

func requireNotExist(t T, sb *sandbox.Sandbox, name string) {
	t.Helper()
	_, err := sb.ReadFile(ctx(t), name)
	isError(t, err, "ReadFile %s", name)
	errorIs(t, err, fs.ErrNotExist, "ReadFile %s", name)
}

func requireEscape(t T, err error, what string) {
	t.Helper()
	isError(t, err, what)
	errorIs(t, err, sandbox.ErrEscape, what)
}

var cases = append(baseCases, trustCases...)

var baseCases = []testCase{
	{
		name: "ExitCode",
		rule: "a command that exits non-zero is a Result with its exit code and a nil error",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, nil)
			equal(t, 0, run(t, sb, sandbox.Cmd{Args: []string{"true"}}).ExitCode)
			equal(t, 1, run(t, sb, sandbox.Cmd{Args: []string{"false"}}).ExitCode)
		},
	},
	{
		name: "ExitCodeShell", needs: []Feature{Shell},
		rule: "the exact exit status of the command is reported",
		run: func(t T, s *suite) {
			equal(t, 42, run(t, s.sandbox(t, nil), sh("exit 42")).ExitCode)
		},
	},
	{
		name: "MissingProgram",
		rule: "a program that does not exist is a non-zero exit code, not a sandbox error",
		run: func(t T, s *suite) {
			res := run(t, s.sandbox(t, nil), sandbox.Cmd{Args: []string{"proctor-no-such-program"}})
			notEqual(t, 0, res.ExitCode)
		},
	},
	{
		name: "StdoutStderr", needs: []Feature{Shell},
		rule: "stdout and stderr are captured separately",
		run: func(t T, s *suite) {
			res := run(t, s.sandbox(t, nil), sh("echo out; echo err >&2; echo out2"))
			equal(t, "out\nout2\n", string(res.Stdout))
			equal(t, "err\n", string(res.Stderr))
		},
	},
	{
		name: "Stdin",
		rule: "Cmd.Stdin is the command's standard input",
		run: func(t T, s *suite) {
			in := append([]byte("hello\x00\xff"), random(t, 1<<20)...)
			res := run(t, s.sandbox(t, nil), sandbox.Cmd{Args: []string{"cat"}, Stdin: in})
			equalBytes(t, in, res.Stdout, "stdout")
		},
	},
	{
		name: "LargeOutput",
		rule: "outputs of several MB come back whole",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, nil)
			big := random(t, 8<<20)
			write(t, sb, "big.bin", big)
			equalBytes(t, big, run(t, sb, sandbox.Cmd{Args: []string{"cat", "big.bin"}}).Stdout, "stdout")
		},
	},
	{
		name: "LargeStderr", needs: []Feature{Shell},
		rule: "stdout and stderr of several MB each come back whole, even written concurrently",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, nil)
			a, b := random(t, 4<<20), random(t, 4<<20)
			write(t, sb, "a.bin", a)
			write(t, sb, "b.bin", b)
			res := run(t, sb, sh("cat a.bin & cat b.bin >&2; wait"))
			equalBytes(t, a, res.Stdout, "stdout")
			equalBytes(t, b, res.Stderr, "stderr")
		},
	},
	{
		name: "Env",
		rule: "Spec.Env and Cmd.Env reach the command, Cmd.Env winning",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, func(sp *sandbox.Spec) {
				if sp.Env == nil {
					sp.Env = map[string]string{}
				}
				sp.Env["PROCTOR_A"] = "spec"
				sp.Env["PROCTOR_B"] = "spec"
			})
			res := run(t, sb, sandbox.Cmd{Args: []string{"env"}, Env: map[string]string{"PROCTOR_B": "cmd"}})
			lines := strings.Split(string(res.Stdout), "\n")
			contains(t, lines, "PROCTOR_A=spec")
			contains(t, lines, "PROCTOR_B=cmd")
			notContains(t, lines, "PROCTOR_B=spec")
		},
	},
	{
		name: "Dir",
		rule: "Cmd.Dir is the working directory, relative to the workspace",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, nil)
			write(t, sb, "sub/dir/f.txt", []byte("in sub\n"))
			res := run(t, sb, sandbox.Cmd{Args: []string{"cat", "f.txt"}, Dir: "sub/dir"})
			equal(t, "in sub\n", string(res.Stdout))
		},
	},
	{
		name: "Timeout",
		rule: "Cmd.Timeout stops the command: TimedOut, exit code -1, nil error, promptly",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, nil)
			start := time.Now()
			res := run(t, sb, sandbox.Cmd{Args: []string{"sleep", "30"}, Timeout: 300 * time.Millisecond})
			isTrue(t, res.TimedOut, "TimedOut")
			equal(t, -1, res.ExitCode)
			less(t, time.Since(start), 10*time.Second)
		},
	},
	{
		name: "TimeoutKillsTree", needs: []Feature{Shell},
		rule: "a timeout kills the whole process tree: no child outlives the command",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, nil)
			res := run(t, sb, sandbox.Cmd{
				Args:    []string{"sh", "-c", "(sleep 1; echo escaped > escaped.txt) & sh -c 'sleep 1; echo escaped > escaped2.txt' & sleep 30"},
				Timeout: 300 * time.Millisecond,
			})
			isTrue(t, res.TimedOut, "TimedOut")
			time.Sleep(2 * time.Second)
			requireNotExist(t, sb, "escaped.txt")
			requireNotExist(t, sb, "escaped2.txt")
		},
	},
	{
		name: "Cancel",
		rule: "a done ctx stops the command and Exec returns an error wrapping ctx.Err()",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, nil)
			c, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := sb.Exec(c, sandbox.Cmd{Args: []string{"sleep", "30"}})
			errorIs(t, err, context.DeadlineExceeded)
			less(t, time.Since(start), 10*time.Second)
			// The sandbox is still usable.
			equal(t, 0, run(t, sb, sandbox.Cmd{Args: []string{"true"}}).ExitCode)
		},
	},
	{
		name: "FileRoundTrip",
		rule: "WriteFile then ReadFile gives the same bytes: text, binary, large, nested, overwritten",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, nil)
			var all []byte
			for i := range 256 {
				all = append(all, byte(i))
			}
			files := map[string][]byte{
				"a.txt":            []byte("hello\n"),
				"empty":            {},
				"bin/all-bytes":    all,
				"deep/er/and/more": random(t, 1000),
				"large.bin":        random(t, 16<<20),
			}
			for name, data := range files {
				write(t, sb, name, data)
			}
			for name, data := range files {
				equalBytes(t, data, read(t, sb, name), name)
			}
			write(t, sb, "a.txt", []byte("x"))
			equal(t, "x", string(read(t, sb, "a.txt")), "overwrite truncates")
		},
	},
	{
		name: "FilesVisibleToCommands",
		rule: "files written through the API are seen by commands",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, nil)
			write(t, sb, "note.txt", []byte("from the API\n"))
			equal(t, "from the API\n", string(run(t, sb, sandbox.Cmd{Args: []string{"cat", "note.txt"}}).Stdout))
		},
	},
	{
		name: "CommandWritesVisible", needs: []Feature{Shell},
		rule: "files written by commands are seen through the API",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, nil)
			equal(t, 0, run(t, sb, sh("mkdir -p out && echo made > out/f.txt")).ExitCode)
			equal(t, "made\n", string(read(t, sb, "out/f.txt")))
		},
	},
	{
		name: "NotExist",
		rule: "a missing file or directory satisfies errors.Is(err, fs.ErrNotExist)",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, nil)
			requireNotExist(t, sb, "missing.txt")
			requireNotExist(t, sb, "missing/dir/f")
			_, err := sb.ReadDir(ctx(t), "missing-dir")
			errorIs(t, err, fs.ErrNotExist)
		},
	},
	{
		name: "ReadDir",
		rule: "ReadDir lists names, sizes and directories, sorted by name",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, nil)
			write(t, sb, "list/b.txt", []byte("12345"))
			write(t, sb, "list/a.txt", []byte("1"))
			write(t, sb, "list/sub/c.txt", []byte("x"))
			got, err := sb.ReadDir(ctx(t), "list")
			noError(t, err)
			type entry struct {
				Name  string
				Size  int64
				IsDir bool
			}
			var gotE []entry
			for _, fi := range got {
				e := entry{Name: fi.Name, IsDir: fi.IsDir}
				if !fi.IsDir {
					e.Size = fi.Size
				}
				equal(t, fi.IsDir, fi.Mode.IsDir(), "Mode.IsDir of %s", fi.Name)
				gotE = append(gotE, e)
			}
			want := []entry{{"a.txt", 1, false}, {"b.txt", 5, false}, {"sub", 0, true}}
			if d := cmp.Diff(want, gotE); d != "" {
				t.Fatalf("ReadDir (-want +got):\n%s", d)
			}
			root, err := sb.ReadDir(ctx(t), "")
			noError(t, err)
			var names []string
			for _, fi := range root {
				names = append(names, fi.Name)
			}
			contains(t, names, "list")
		},
	},
	{
		name: "TemplateAndFiles",
		rule: "Spec.Template and Spec.Files make the initial workspace, Files written after Template",
		run: func(t T, s *suite) {
			tmpl := t.TempDir()
			noError(t, os.MkdirAll(filepath.Join(tmpl, "src"), 0o755))
			noError(t, os.WriteFile(filepath.Join(tmpl, "src", "main.txt"), []byte("template\n"), 0o644))
			noError(t, os.WriteFile(filepath.Join(tmpl, "over.txt"), []byte("template\n"), 0o644))
			sb := s.sandbox(t, func(sp *sandbox.Spec) {
				sp.Template = tmpl
				sp.Files = map[string][]byte{"over.txt": []byte("files\n"), "new/f.txt": []byte("new\n")}
			})
			equal(t, "template\n", string(read(t, sb, "src/main.txt")))
			equal(t, "files\n", string(read(t, sb, "over.txt")))
			equal(t, "new\n", string(read(t, sb, "new/f.txt")))
		},
	},
	{
		name: "SetupVisibleInForks", needs: []Feature{Shell},
		rule: "what Setup did is seen by every fork",
		run: func(t T, s *suite) {
			env := s.env(t, func(sp *sandbox.Spec) {
				sp.Files = map[string][]byte{"in.txt": []byte("input\n")}
				sp.Setup = []sandbox.Cmd{sh("cat in.txt > setup.txt && echo ready >> setup.txt")}
			})
			for i := range 2 {
				sb := fork(t, env)
				equal(t, "input\nready\n", string(read(t, sb, "setup.txt")), "fork %d", i)
			}
		},
	},
	{
		name: "SetupFailure", needs: []Feature{Shell},
		rule: "a Setup command that exits non-zero fails Provision with ErrUnavailable",
		run: func(t T, s *suite) {
			env, err := s.p.Provision(ctx(t), s.spec(func(sp *sandbox.Spec) {
				sp.Setup = []sandbox.Cmd{sh("exit 3")}
			}))
			if err == nil {
				env.Close()
			}
			errorIs(t, err, sandbox.ErrUnavailable)
		},
	},
	{
		name: "SetupTimeout",
		rule: "a Setup command's Timeout holds: Provision fails promptly with ErrUnavailable, not the caller's ctx error",
		run: func(t T, s *suite) {
			start := time.Now()
			env, err := s.p.Provision(ctx(t), s.spec(func(sp *sandbox.Spec) {
				sp.Setup = []sandbox.Cmd{{Args: []string{"sleep", "30"}, Timeout: 300 * time.Millisecond}}
			}))
			if err == nil {
				env.Close()
			}
			errorIs(t, err, sandbox.ErrUnavailable)
			isTrue(t, !errors.Is(err, context.DeadlineExceeded), "the error is not the caller's deadline: %v", err)
			less(t, time.Since(start), 20*time.Second)
		},
	},
	{
		name: "ForkIsolation",
		rule: "forks of one environment never see each other's writes",
		run: func(t T, s *suite) {
			env := s.env(t, func(sp *sandbox.Spec) {
				sp.Files = map[string][]byte{"shared.txt": []byte("original")}
			})
			a, b := fork(t, env), fork(t, env)
			write(t, a, "shared.txt", []byte("changed by a"))
			write(t, a, "only-a.txt", []byte("a"))
			equal(t, "original", string(read(t, b, "shared.txt")))
			requireNotExist(t, b, "only-a.txt")
			equal(t, "changed by a", string(read(t, a, "shared.txt")))
		},
	},
	{
		name: "ForkIsolationShell", needs: []Feature{Shell},
		rule: "commands in one fork do not change another fork's files",
		run: func(t T, s *suite) {
			env := s.env(t, func(sp *sandbox.Spec) {
				sp.Files = map[string][]byte{"shared.txt": []byte("original"), "d/x": []byte("x")}
			})
			a, b := fork(t, env), fork(t, env)
			equal(t, 0, run(t, a, sh("echo changed > shared.txt && rm -r d && echo a > only-a.txt")).ExitCode)
			equal(t, "original", string(read(t, b, "shared.txt")))
			equal(t, "x", string(read(t, b, "d/x")))
			requireNotExist(t, b, "only-a.txt")
		},
	},
	{
		name: "EnvironmentUntouched",
		rule: "no write in a fork reaches the template or later forks",
		run: func(t T, s *suite) {
			tmpl := t.TempDir()
			noError(t, os.WriteFile(filepath.Join(tmpl, "t.txt"), []byte("template"), 0o644))
			env := s.env(t, func(sp *sandbox.Spec) { sp.Template = tmpl })
			a := fork(t, env)
			write(t, a, "t.txt", []byte("changed"))
			write(t, a, "new.txt", []byte("new"))
			noError(t, a.Close())
			b := fork(t, env)
			equal(t, "template", string(read(t, b, "t.txt")))
			requireNotExist(t, b, "new.txt")
			got, err := os.ReadFile(filepath.Join(tmpl, "t.txt"))
			noError(t, err)
			equal(t, "template", string(got))
			_, err = os.Stat(filepath.Join(tmpl, "new.txt"))
			errorIs(t, err, fs.ErrNotExist)
		},
	},
	{
		name: "Close",
		rule: "Close is idempotent and every call after it returns ErrClosed",
		run: func(t T, s *suite) {
			env := s.env(t, nil)
			sb := fork(t, env)
			noError(t, sb.Close())
			noError(t, sb.Close(), "second Close")
			c := ctx(t)
			_, err := sb.Exec(c, sandbox.Cmd{Args: []string{"true"}})
			errorIs(t, err, sandbox.ErrClosed, "Exec")
			_, err = sb.ReadFile(c, "f")
			errorIs(t, err, sandbox.ErrClosed, "ReadFile")
			errorIs(t, sb.WriteFile(c, "f", nil, 0o644), sandbox.ErrClosed, "WriteFile")
			_, err = sb.ReadDir(c, "")
			errorIs(t, err, sandbox.ErrClosed, "ReadDir")
			noError(t, env.Close())
			noError(t, env.Close(), "second environment Close")
			_, err = env.Fork(c)
			errorIs(t, err, sandbox.ErrClosed, "Fork after Close")
		},
	},
	{
		name: "ForkOutlivesEnvironment",
		rule: "a fork still open when its environment closes stays usable",
		run: func(t T, s *suite) {
			env := s.env(t, func(sp *sandbox.Spec) { sp.Files = map[string][]byte{"f": []byte("base")} })
			sb := fork(t, env)
			noError(t, env.Close())
			equal(t, "base", string(read(t, sb, "f")))
			write(t, sb, "g", []byte("g"))
			equal(t, "base", string(run(t, sb, sandbox.Cmd{Args: []string{"cat", "f"}}).Stdout))
		},
	},
	{
		name: "CloseWhileRunning",
		rule: "Close stops a running command",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, nil)
			done := make(chan error, 1)
			go func() {
				_, err := sb.Exec(context.Background(), sandbox.Cmd{Args: []string{"sleep", "60"}})
				done <- err
			}()
			time.Sleep(500 * time.Millisecond)
			noError(t, sb.Close())
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("Exec still running 20s after Close")
			}
		},
	},
	{
		name: "Concurrent",
		rule: "methods may be called concurrently on one sandbox and forks made concurrently",
		run: func(t T, s *suite) {
			env := s.env(t, nil)
			var wg sync.WaitGroup
			var failures atomic.Int64
			for i := range 4 {
				wg.Go(func() {
					sb, err := env.Fork(context.Background())
					if err != nil {
						failures.Add(1)
						return
					}
					defer sb.Close()
					var inner sync.WaitGroup
					for j := range 4 {
						inner.Go(func() {
							name := fmt.Sprintf("f%d-%d", i, j)
							data := []byte(name)
							c := context.Background()
							if sb.WriteFile(c, name, data, 0o644) != nil {
								failures.Add(1)
								return
							}
							res, err := sb.Exec(c, sandbox.Cmd{Args: []string{"cat", name}})
							if err != nil || !bytes.Equal(res.Stdout, data) {
								failures.Add(1)
							}
						})
					}
					inner.Wait()
				})
			}
			wg.Wait()
			zero(t, failures.Load(), "failed operations")
		},
	},

	// --- security ---

	{
		name: "PathTraversal",
		rule: "paths that leave the workspace through .. or as absolute paths fail with ErrEscape",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, nil)
			c := ctx(t)
			for _, name := range []string{"../../etc/passwd", "..", "a/../../x", "/etc/passwd"} {
				_, err := sb.ReadFile(c, name)
				requireEscape(t, err, "ReadFile "+name)
			}
			requireEscape(t, sb.WriteFile(c, "../escape.txt", []byte("x"), 0o644), "WriteFile ../escape.txt")
			requireEscape(t, sb.WriteFile(c, "/tmp/proctor-escape.txt", []byte("x"), 0o644), "WriteFile /tmp/…")
			_, err := sb.ReadDir(c, "..")
			requireEscape(t, err, "ReadDir ..")
			_, err = sb.Exec(c, sandbox.Cmd{Args: []string{"true"}, Dir: "../.."})
			requireEscape(t, err, "Exec Dir ../..")
			// Inside the workspace, ".." is fine.
			write(t, sb, "a/../b.txt", []byte("b"))
			equal(t, "b", string(read(t, sb, "b.txt")))
		},
	},
	{
		name: "SymlinkEscape",
		rule: "symlinks pointing out of the workspace are not followed by file operations (ErrEscape)",
		run: func(t T, s *suite) {
			tmpl := t.TempDir()
			outside := t.TempDir()
			noError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644))
			noError(t, os.Symlink("/etc", filepath.Join(tmpl, "etc")))
			noError(t, os.Symlink("/etc/passwd", filepath.Join(tmpl, "passwd")))
			noError(t, os.Symlink(outside, filepath.Join(tmpl, "out")))
			noError(t, os.Symlink("../../../../../../../../etc/passwd", filepath.Join(tmpl, "rel")))
			noError(t, os.WriteFile(filepath.Join(tmpl, "real.txt"), []byte("real"), 0o644))
			noError(t, os.Symlink("real.txt", filepath.Join(tmpl, "inside")))
			sb := s.sandbox(t, func(sp *sandbox.Spec) { sp.Template = tmpl })
			c := ctx(t)
			for _, name := range []string{"etc/passwd", "passwd", "out/secret", "rel"} {
				_, err := sb.ReadFile(c, name)
				requireEscape(t, err, "ReadFile "+name)
			}
			requireEscape(t, sb.WriteFile(c, "out/written", []byte("x"), 0o644), "WriteFile out/written")
			requireEscape(t, sb.WriteFile(c, "out/new/deeper", []byte("x"), 0o644), "WriteFile out/new/deeper")
			_, err := os.Stat(filepath.Join(outside, "written"))
			errorIs(t, err, fs.ErrNotExist, "write reached the host")
			_, err = sb.ReadDir(c, "etc")
			requireEscape(t, err, "ReadDir etc")
			_, err = sb.Exec(c, sandbox.Cmd{Args: []string{"true"}, Dir: "out"})
			requireEscape(t, err, "Exec Dir out")
			equal(t, "real", string(read(t, sb, "inside")), "a symlink inside the workspace is followed")
		},
	},
	{
		name: "NetworkDisabled", needs: []Feature{Binaries},
		guarantee: func(g sandbox.Guarantees) bool { return g.IPNetwork },
		rule:      "with Spec.Network false nothing on the host (loopback or other addresses) is reachable; with it true the host is",
		run: func(t T, s *suite) {
			ln, err := net.Listen("tcp", ":0")
			noError(t, err)
			defer ln.Close()
			var accepted atomic.Int64
			go greet(ln, &accepted)
			port := ln.Addr().(*net.TCPAddr).Port
			addrs := hostAddrs()
			probe := func(sb *sandbox.Sandbox) (reached []string) {
				p := s.probe(t, sb)
				for _, a := range addrs {
					res := run(t, sb, sandbox.Cmd{Args: []string{p, "dial", "tcp", net.JoinHostPort(a, strconv.Itoa(port))}, Timeout: 15 * time.Second})
					if strings.Contains(string(res.Stdout), "proctor-ok") {
						reached = append(reached, a)
					}
				}
				return reached
			}
			off := s.sandbox(t, func(sp *sandbox.Spec) { sp.Network = false })
			empty(t, probe(off), "addresses reached with Network false")
			zero(t, accepted.Load(), "connections accepted from a sandbox without network")
			on := s.sandbox(t, func(sp *sandbox.Spec) { sp.Network = true })
			notEmpty(t, probe(on), "no host address reached with Network true: the probe itself does not work")
		},
	},
	{
		name: "UnixSocketsUnreachable", needs: []Feature{Binaries},
		guarantee: func(g sandbox.Guarantees) bool { return g.Network },
		rule:      "a provider that guarantees network isolation lets no sandbox reach a Unix socket on the host (such as the Docker daemon's)",
		run: func(t T, s *suite) {
			// Short: a socket path has a limit of about 100 bytes.
			dir, err := os.MkdirTemp("", "px")
			noError(t, err)
			t.Cleanup(func() { os.RemoveAll(dir) })
			sock := filepath.Join(dir, "s")
			ln, err := net.Listen("unix", sock)
			noError(t, err)
			defer ln.Close()
			var accepted atomic.Int64
			go greet(ln, &accepted)
			sb := s.sandbox(t, func(sp *sandbox.Spec) { sp.Network = false })
			res := run(t, sb, sandbox.Cmd{Args: []string{s.probe(t, sb), "dial", "unix", sock}, Timeout: 15 * time.Second})
			notContainsText(t, string(res.Stdout), "proctor-ok", "a host Unix socket was reached")
			zero(t, accepted.Load(), "connections accepted on a host Unix socket")
		},
	},
	{
		name: "GatewayReached", needs: []Feature{Binaries},
		rule: "a provider that serves a model gateway (sandbox.Provider.ServeGateway) has every sandbox reach it at its URL, with Spec.Network false or true",
		run: func(t T, s *suite) {
			url, secret := serveGateway(t, s)
			for _, network := range []bool{false, true} {
				sb := s.sandbox(t, func(sp *sandbox.Spec) { sp.Network = network })
				res := run(t, sb, sandbox.Cmd{Args: []string{s.probe(t, sb), "dial", "tcp", strings.TrimPrefix(url, "http://"), "GET / HTTP/1.0\r\n\r\n"}, Timeout: 15 * time.Second})
				isTrue(t, strings.Contains(string(res.Stdout), secret), "the gateway at %s not reached with Network %v: %q %q", url, network, res.Stdout, res.Stderr)
			}
		},
	},
	{
		name: "GatewayOnly", needs: []Feature{Binaries},
		guarantee: func(g sandbox.Guarantees) bool { return g.Gateway },
		rule:      "with a gateway served and Spec.Network false, a sandbox reaches the gateway and no other server of the host, at any of its addresses",
		run: func(t T, s *suite) {
			url, secret := serveGateway(t, s)
			ln, err := net.Listen("tcp", ":0")
			noError(t, err)
			defer ln.Close()
			var accepted atomic.Int64
			go greet(ln, &accepted)
			port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
			sb := s.sandbox(t, func(sp *sandbox.Spec) { sp.Network = false })
			p := s.probe(t, sb)
			res := run(t, sb, sandbox.Cmd{Args: []string{p, "dial", "tcp", strings.TrimPrefix(url, "http://"), "GET / HTTP/1.0\r\n\r\n"}, Timeout: 15 * time.Second})
			isTrue(t, strings.Contains(string(res.Stdout), secret), "the gateway at %s not reached: %q %q", url, res.Stdout, res.Stderr)
			for _, a := range hostAddrs() {
				res := run(t, sb, sandbox.Cmd{Args: []string{p, "dial", "tcp", net.JoinHostPort(a, port)}, Timeout: 15 * time.Second})
				notContainsText(t, string(res.Stdout), "proctor-ok", "a second server of the host reached at "+a)
			}
			zero(t, accepted.Load(), "connections accepted by a second server of the host")
		},
	},
	{
		name: "PidsLimit", needs: []Feature{Shell},
		guarantee: func(g sandbox.Guarantees) bool { return g.Pids },
		rule:      "Limits.Pids bounds a fork bomb",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, func(sp *sandbox.Spec) { sp.Limits.Pids = 32 })
			res := run(t, sb, sandbox.Cmd{
				Args:    []string{"sh", "-c", "i=0; while [ $i -lt 200 ]; do sleep 5 >/dev/null 2>&1 & i=$((i+1)); done; echo all-started"},
				Timeout: 60 * time.Second,
			})
			isFalse(t, res.ExitCode == 0 && strings.Contains(string(res.Stdout), "all-started"),
				"200 processes started under a limit of 32: exit %d, stderr %q", res.ExitCode, res.Stderr)
		},
	},
	{
		name: "MemoryLimit", needs: []Feature{Shell},
		guarantee: func(g sandbox.Guarantees) bool { return g.Memory },
		rule:      "Limits.MemoryBytes bounds a runaway allocation",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, func(sp *sandbox.Spec) { sp.Limits.MemoryBytes = 32 << 20 })
			res, _ := sb.Exec(ctx(t), allocate)
			isFalse(t, res.ExitCode == 0 && strings.TrimSpace(string(res.Stdout)) == "200000000",
				"200 MB held under a 32 MB limit")
		},
	},
	{
		name: "OOMIsAnError", needs: []Feature{Shell},
		guarantee: func(g sandbox.Guarantees) bool { return g.OOM },
		rule:      "a command the out-of-memory killer ended is an error wrapping ErrOOM (and ErrUnavailable), kept by OOMKilled; a command killed otherwise is not",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, func(sp *sandbox.Spec) { sp.Limits.MemoryBytes = 32 << 20 })
			res, err := sb.Exec(ctx(t), sh("sleep 30 & kill -9 $!; wait $!"))
			noError(t, err, "a command whose child was killed by SIGKILL, under a memory limit it did not reach")
			notEqual(t, 0, res.ExitCode, "exit code of a command whose child was killed")
			noError(t, sb.OOMKilled(), "OOMKilled before any allocation")
			_, err = sb.Exec(ctx(t), allocate)
			errorIs(t, err, sandbox.ErrOOM, "a command allocating 200 MB under a 32 MB limit")
			errorIs(t, err, sandbox.ErrUnavailable, "the OOM error")
			errorIs(t, sb.OOMKilled(), sandbox.ErrOOM, "OOMKilled after the allocation")
			res = run(t, sb, sh("echo still-here"))
			equal(t, "still-here", strings.TrimSpace(string(res.Stdout)), "a command after the OOM kill")
		},
	},
}

// allocate holds 200 MB in a shell variable.
var allocate = sandbox.Cmd{
	Args:    []string{"sh", "-c", `x=$(head -c 200000000 /dev/zero | tr '\0' a); echo ${#x}`},
	Timeout: 60 * time.Second,
}

// hostAddrs is the host's loopback and every IPv4 address of its
// interfaces.
func hostAddrs() []string {
	addrs := []string{"127.0.0.1"}
	ifaddrs, _ := net.InterfaceAddrs()
	for _, a := range ifaddrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
			addrs = append(addrs, ipn.IP.String())
		}
	}
	return addrs
}

// serveGateway serves a stand-in gateway through the provider, answering
// every request with a secret, for the case's duration; it skips the case
// when the provider cannot serve one.
func serveGateway(t T, s *suite) (url, secret string) {
	secret = "proctor-gateway-" + rand.Text()
	url, stop, err := s.p.ServeGateway(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, secret)
	}))
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("provider serves no gateway: %v", err)
	}
	noError(t, err, "ServeGateway")
	t.Cleanup(func() { stop() })
	return url, secret
}

func greet(ln net.Listener, accepted *atomic.Int64) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		accepted.Add(1)
		conn.Write([]byte("proctor-ok\n"))
		conn.Close()
	}
}

//go:embed testdata/probe/main.go
var probeSource []byte

var probeBuild = sync.OnceValues(buildProbe)

// buildProbe builds the probe once per process into the user's cache
// directory (keyed by its source and target), so that runs reuse it.
func buildProbe() (string, error) {
	//lint:ignore SA1019 the toolchain that built this test builds the probe; PATH is the fallback
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			return "", fmt.Errorf("no go command to build the probe: %w", err)
		}
	}
	sum := sha256.Sum256(append(probeSource, runtime.GOOS+"/"+runtime.GOARCH+"/"+runtime.Version()...))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "proctor-sandboxtest")
	bin := filepath.Join(dir, "probe-"+hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	src, err := os.MkdirTemp(dir, "src-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module probe\n\ngo 1.22\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), probeSource, 0o644); err != nil {
		return "", err
	}
	tmp := filepath.Join(src, "probe")
	cmd := exec.Command(goTool, "build", "-trimpath", "-ldflags=-s -w", "-o", tmp, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GOWORK=off", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the probe: %w: %s", err, out)
	}
	// Renamed into place: concurrent test processes may build it too.
	return bin, os.Rename(tmp, bin)
}

// probe writes the probe into sb and returns the name to run it by. Where
// the provider lacks Binaries it returns the name alone: the Fake runs
// "./probe yes" as a builtin.
func (s *suite) probe(t T, sb *sandbox.Sandbox) string {
	t.Helper()
	const name = "./probe"
	if s.cfg.without[Binaries] {
		return name
	}
	bin, err := probeBuild()
	if err != nil {
		if os.Getenv("PROCTOR_REQUIRE_TOOLS") == "1" {
			t.Fatalf("PROCTOR_REQUIRE_TOOLS=1 but %v", err)
		}
		t.Skipf("%v", err)
	}
	data, err := os.ReadFile(bin)
	noError(t, err)
	noError(t, sb.WriteFile(ctx(t), "probe", data, 0o755), "writing the probe")
	return name
}

// trustCases check what a hostile or runaway command must not do to the
// caller: names a driver must not refuse, and caps on what comes back.
var trustCases = []testCase{
	{
		name: "LegalNames",
		rule: "every legal file name works: \"..name\", spaces, unicode, leading dashes",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, nil)
			names := []string{"..name", "...", "a b.txt", "dir with space/ünïcödé ✓.txt", "-dash", "..d/..e", ".hidden"}
			for _, name := range names {
				write(t, sb, name, []byte(name))
			}
			for _, name := range names {
				equal(t, name, string(read(t, sb, name)), "ReadFile %q", name)
			}
			list, err := sb.ReadDir(ctx(t), "")
			noError(t, err)
			var got []string
			for _, fi := range list {
				got = append(got, fi.Name)
			}
			for _, want := range []string{"..name", "...", "a b.txt", "dir with space", "-dash", "..d", ".hidden"} {
				contains(t, got, want, "ReadDir of the root")
			}
			equal(t, "..d/..e", string(run(t, sb, sandbox.Cmd{Args: []string{"cat", "..e"}, Dir: "..d"}).Stdout), "Cmd.Dir \"..d\"")
			equal(t, "..name", string(run(t, sb, sandbox.Cmd{Args: []string{"cat", "..name"}}).Stdout), "a command reads \"..name\"")
		},
	},
	{
		name: "InvalidNames",
		rule: "names with a NUL byte or invalid UTF-8, and the root as a file, are refused before reaching the driver",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, nil)
			c := ctx(t)
			errorIs(t, sb.WriteFile(c, "a\x00b", nil, 0o644), fs.ErrInvalid)
			errorIs(t, sb.WriteFile(c, "bad\xffutf8", nil, 0o644), fs.ErrInvalid)
			errorIs(t, sb.WriteFile(c, "", nil, 0o644), fs.ErrInvalid)
			_, err := sb.Exec(c, sandbox.Cmd{Args: []string{"true"}, Env: map[string]string{"A=B": "x"}})
			errorIs(t, err, fs.ErrInvalid)
			_, err = sb.Exec(c, sandbox.Cmd{})
			errorIs(t, err, fs.ErrInvalid)
		},
	},
	{
		name: "OutputCapped",
		rule: "each output stream keeps Limits.OutputBytes and the Result is marked Truncated; the command still runs to its end",
		run: func(t T, s *suite) {
			const limit = 1 << 20
			sb := s.sandbox(t, func(sp *sandbox.Spec) { sp.Limits.OutputBytes = limit })
			p := s.probe(t, sb)
			res := run(t, sb, sandbox.Cmd{Args: []string{p, "yes", "3000000"}})
			equal(t, 0, res.ExitCode, "stderr: %q", res.Stderr)
			isTrue(t, res.Truncated, "Truncated")
			hasLen(t, res.Stdout, limit)
			equal(t, "y\ny\n", string(res.Stdout[:4]))
			res = run(t, sb, sandbox.Cmd{Args: []string{p, "yes-err", "3000000"}})
			isTrue(t, res.Truncated, "Truncated")
			hasLen(t, res.Stderr, limit)
			res = run(t, sb, sandbox.Cmd{Args: []string{p, "yes", "1000"}})
			isFalse(t, res.Truncated, "1000 bytes under a 1 MiB cap")
			hasLen(t, res.Stdout, 1000)
		},
	},
	{
		name: "EndlessOutput",
		rule: "a command that writes forever (yes) costs the caller at most the default cap, and its Timeout still ends it",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, nil)
			res := run(t, sb, sandbox.Cmd{Args: []string{s.probe(t, sb), "yes"}, Timeout: 2 * time.Second})
			isTrue(t, res.TimedOut, "TimedOut")
			lessOrEqual(t, len(res.Stdout), sandbox.DefaultOutputBytes)
			if len(res.Stdout) == sandbox.DefaultOutputBytes {
				isTrue(t, res.Truncated, "Truncated")
			}
		},
	},
	{
		name: "ReadCapped",
		rule: "ReadFile refuses a file over Limits.ReadBytes with ErrTooLarge, and reads one at the cap",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, func(sp *sandbox.Spec) { sp.Limits.ReadBytes = 1000 })
			write(t, sb, "big", make([]byte, 1001))
			write(t, sb, "fits", make([]byte, 1000))
			_, err := sb.ReadFile(ctx(t), "big")
			errorIs(t, err, sandbox.ErrTooLarge)
			var pe *sandbox.PathError
			errorAs(t, err, &pe)
			equal(t, "big", pe.Path)
			hasLen(t, read(t, sb, "fits"), 1000)
		},
	},
	{
		name: "SparseFileRefused", needs: []Feature{Binaries},
		rule: "a sparse 100 GB file is refused with ErrTooLarge at once, not read",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, nil)
			res := run(t, sb, sandbox.Cmd{Args: []string{s.probe(t, sb), "sparse", "huge", "100000000000"}})
			equal(t, 0, res.ExitCode, "probe sparse: %s", res.Stderr)
			start := time.Now()
			_, err := sb.ReadFile(ctx(t), "huge")
			errorIs(t, err, sandbox.ErrTooLarge)
			less(t, time.Since(start), 10*time.Second)
		},
	},
	{
		name: "NotRegularRefused",
		rule: "ReadFile of a directory is an error wrapping ErrNotRegular",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, nil)
			write(t, sb, "d/f", []byte("x"))
			_, err := sb.ReadFile(ctx(t), "d")
			errorIs(t, err, sandbox.ErrNotRegular)
		},
	},
	{
		name: "FIFORefused", needs: []Feature{Binaries},
		rule: "ReadFile of a FIFO is an error wrapping ErrNotRegular, without blocking",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, nil)
			res := run(t, sb, sandbox.Cmd{Args: []string{s.probe(t, sb), "mkfifo", "fifo"}})
			equal(t, 0, res.ExitCode, "probe mkfifo: %s", res.Stderr)
			c, cancel := context.WithTimeout(ctx(t), 20*time.Second)
			defer cancel()
			_, err := sb.ReadFile(c, "fifo")
			errorIs(t, err, sandbox.ErrNotRegular)
		},
	},
	{
		name: "DoneContext",
		rule: "every call with a done ctx fails with ctx.Err() and does nothing",
		run: func(t T, s *suite) {
			sb := s.sandbox(t, nil)
			c, cancel := context.WithCancel(ctx(t))
			cancel()
			_, err := sb.ReadFile(c, "f")
			errorIs(t, err, context.Canceled)
			errorIs(t, sb.WriteFile(c, "f", []byte("x"), 0o644), context.Canceled)
			requireNotExist(t, sb, "f")
			_, err = sb.Exec(c, sandbox.Cmd{Args: []string{"true"}})
			errorIs(t, err, context.Canceled)
		},
	},
	{
		name: "DiskLimit", needs: []Feature{Binaries},
		guarantee: func(g sandbox.Guarantees) bool { return g.Disk },
		rule:      "Limits.DiskBytes bounds what a sandbox writes to its workspace, which still holds its template and takes writes within the limit",
		run: func(t T, s *suite) {
			tmpl := t.TempDir()
			noError(t, os.WriteFile(filepath.Join(tmpl, "t.txt"), []byte("template"), 0o644))
			sb := s.sandbox(t, func(sp *sandbox.Spec) { sp.Template = tmpl; sp.Limits.DiskBytes = 8 << 20 })
			equal(t, "template", string(read(t, sb, "t.txt")), "the template under a disk limit")
			p := s.probe(t, sb)
			res := run(t, sb, sandbox.Cmd{Args: []string{p, "fill", "small", strconv.Itoa(1 << 20)}, Timeout: time.Minute})
			equal(t, 0, res.ExitCode, "1 MiB refused under an 8 MiB limit: %s", res.Stderr)
			res = run(t, sb, sandbox.Cmd{Args: []string{p, "fill", "fill", strconv.Itoa(64 << 20)}, Timeout: time.Minute})
			notEqual(t, 0, res.ExitCode, "64 MiB written under an 8 MiB limit")
		},
	},
}
