//go:build linux

package filelock_test

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/proctor-evals/proctor/internal/filelock"
)

const childEnv = "PROCTOR_FILELOCK_CHILD"

// TestMain runs the child of TestLockReportsAFailedWrite: a process that
// may not write a byte (RLIMIT_FSIZE 0, SIGXFSZ ignored, so a write
// fails with EFBIG) takes a lock.
func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		signal.Ignore(syscall.SIGXFSZ)
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 0, Max: 0}); err != nil {
			os.Stdout.WriteString("setrlimit: " + err.Error())
			os.Exit(2)
		}
		if _, err := filelock.Lock(path); err != nil {
			os.Stdout.WriteString("error: " + err.Error())
			os.Exit(0)
		}
		os.Stdout.WriteString("locked")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestLockReportsAFailedWrite: a lock whose "pid host" cannot be written
// is an error (it was dropped: the write's error went to a shadowed
// variable).
func TestLockReportsAFailedWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.jsonl")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v: %s", err, out)
	}
	if !strings.HasPrefix(string(out), "error: locking ") || !strings.Contains(string(out), "file too large") {
		t.Fatalf("the child should fail to lock: %s", out)
	}
}

func TestLockIsExclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.jsonl")
	f, err := filelock.Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = filelock.Lock(path)
	var locked *filelock.LockedError
	if !errors.As(err, &locked) || locked.PID != os.Getpid() {
		t.Fatalf("a second lock: %v", err)
	}
	if err := filelock.Held(path); err == nil {
		t.Fatal("Held sees no holder")
	}
	if err := filelock.Unlock(path, f); err != nil {
		t.Fatal(err)
	}
	if err := filelock.Held(path); err != nil {
		t.Fatalf("Held after Unlock: %v", err)
	}
}

// A lock file planted as a symbolic link, a hard link or a file that is
// not a lock is refused and left as it was: the review file's lock once
// followed such a link and truncated its target (a file of someone
// else's), as the log's lock had learnt not to.
func TestLockTouchesNoFileItDidNotMake(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	const content = "someone else's file\n"
	for name, plant := range map[string]func(lock string) error{
		"symlink":  func(lock string) error { return os.Symlink(victim, lock) },
		"hardlink": func(lock string) error { return os.Link(victim, lock) },
		"not a lock": func(lock string) error {
			return os.WriteFile(lock, []byte(content), 0o644)
		},
	} {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(victim, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "reviews.jsonl")
			if err := plant(path + ".lock"); err != nil {
				t.Fatal(err)
			}
			f, err := filelock.Lock(path)
			if err == nil {
				f.Close()
				t.Fatal("a planted lock file was taken")
			}
			if !strings.Contains(err.Error(), path+".lock") {
				t.Errorf("the error does not name the lock file: %v", err)
			}
			for _, p := range []string{victim, path + ".lock"} {
				if b, err := os.ReadFile(p); err != nil || string(b) != content {
					t.Errorf("%s changed: %q, %v", p, b, err)
				}
			}
		})
	}
}
