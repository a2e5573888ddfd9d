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
