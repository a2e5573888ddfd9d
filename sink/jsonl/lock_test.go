package jsonl_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// TestMain lets the test binary play the second process of
// TestLockAcrossProcesses: with JSONL_LOCK_CHILD set it opens that log,
// says so on stdout and waits to be killed.
func TestMain(m *testing.M) {
	if path := os.Getenv("JSONL_COMPACT_CHILD"); path != "" {
		compactChild(path) // compact_test.go
	}
	if path := os.Getenv("JSONL_LOCK_CHILD"); path != "" {
		_, _, err := jsonl.Open(path, nil) // the Writer stays open
		if err != nil {
			os.Stdout.WriteString("error: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Stdout.WriteString("locked\n")
		select {} // until SIGKILL
	}
	os.Exit(m.Run())
}

// TestLockAcrossProcesses: a log another process writes cannot be opened;
// the error names the holder. Killed with SIGKILL, the holder leaves no
// stale lock.
func TestLockAcrossProcesses(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("needs a second process and SIGKILL")
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log.jsonl")
	write(t, path, rec(0, sink.Pass))

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "JSONL_LOCK_CHILD="+path)
	out, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	msg, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "locked\n", msg)

	_, _, err = jsonl.Open(path, nil)
	var locked *jsonl.LockedError
	require.ErrorAs(t, err, &locked)
	require.Equal(t, child.Process.Pid, locked.PID)
	host, _ := os.Hostname()
	require.Equal(t, host, locked.Host)
	require.Equal(t, path, locked.Path)
	require.ErrorContains(t, err, strconv.Itoa(child.Process.Pid))
	require.ErrorContains(t, err, path)
	_, err = jsonl.Append(path, nil)
	require.ErrorAs(t, err, &locked, "Append takes the lock too")
	_, err = jsonl.Create(path, nil)
	require.ErrorAs(t, err, &locked, "Create does not truncate a log in use")
	got, err := readAll(t, path)
	require.NoError(t, err, "readers take no lock")
	require.Len(t, got, 1)

	require.NoError(t, child.Process.Kill()) // SIGKILL: no cleanup runs
	child.Wait()
	w, recov, err := jsonl.Open(path, nil)
	require.NoError(t, err, "the kernel dropped the dead holder's lock")
	require.Equal(t, 1, recov.Records)
	require.NoError(t, w.Close(context.Background()))
}

// TestLockInOneProcess: a second Writer of a log in the same process
// fails too (flock locks belong to open files, not processes), until the
// first is closed.
func TestLockInOneProcess(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log.jsonl")
	w, _, err := jsonl.Open(path, nil)
	require.NoError(t, err)
	lock, err := os.ReadFile(path + ".lock")
	require.NoError(t, err)
	host, _ := os.Hostname()
	require.Equal(t, strconv.Itoa(os.Getpid())+" "+host+"\n", string(lock))

	_, _, err = jsonl.Open(path, nil)
	var locked *jsonl.LockedError
	require.ErrorAs(t, err, &locked)
	require.Equal(t, os.Getpid(), locked.PID)

	require.NoError(t, w.Write(context.Background(), rec(0, sink.Pass)))
	require.NoError(t, w.Close(context.Background()))
	_, err = os.Stat(path + ".lock")
	require.ErrorIs(t, err, os.ErrNotExist, "a clean Close removes the lock file")
	w, recov, err := jsonl.Open(path, nil)
	require.NoError(t, err)
	require.Equal(t, 1, recov.Records)
	require.NoError(t, w.Close(context.Background()))
}

// TestLockSurvivesDropErrors: Open's rewrite of the log (a rename) does
// not lose the lock, which is on the sidecar, not the log's inode.
func TestLockSurvivesDropErrors(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log.jsonl")
	write(t, path, rec(0, sink.Pass), rec(1, sink.Error))
	w, recov, err := jsonl.Open(path, &jsonl.OpenOptions{DropErrors: true})
	require.NoError(t, err)
	require.Equal(t, 1, recov.Dropped)
	_, _, err = jsonl.Open(path, nil)
	var locked *jsonl.LockedError
	require.ErrorAs(t, err, &locked)
	require.NoError(t, w.Close(context.Background()))
}

// TestLockNeverTruncatesAFileItDidNotWrite: a <log>.lock planted as a
// symbolic link, a hard link or a file of someone else's is refused with
// an error that names it, and what it points to keeps its bytes; Merge's
// output lock the same.
func TestLockNeverTruncatesAFileItDidNotWrite(t *testing.T) {
	t.Parallel()
	plants := []struct {
		name  string
		plant func(lock, victim string) error
	}{
		{"symlink", os.Symlink},
		{"hard link", os.Link},
		{"foreign file", func(_, lock string) error { return os.WriteFile(lock, []byte("precious\n"), 0o644) }},
	}
	for _, p := range plants {
		t.Run(p.name, func(t *testing.T) {
			dir := t.TempDir()
			victim := filepath.Join(dir, "victim.txt")
			require.NoError(t, os.WriteFile(victim, []byte("precious\n"), 0o644))
			log := filepath.Join(dir, "log.jsonl")
			if err := p.plant(victim, log+".lock"); err != nil {
				t.Skipf("cannot plant a %s here: %v", p.name, err)
			}
			_, _, err := jsonl.Open(log, nil)
			require.ErrorContains(t, err, log+".lock")

			shard := filepath.Join(dir, "shard.jsonl")
			write(t, shard, rec(0, sink.Pass))
			out := filepath.Join(dir, "merged.jsonl")
			require.NoError(t, p.plant(victim, out+".lock"))
			_, err = jsonl.Merge(out, []string{shard}, nil)
			require.ErrorContains(t, err, out+".lock")

			b, err := os.ReadFile(victim)
			require.NoError(t, err)
			require.Equal(t, "precious\n", string(b))
			b, err = os.ReadFile(log + ".lock")
			require.NoError(t, err)
			require.Equal(t, "precious\n", string(b))
		})
	}
}

// TestLockReusesTheLockFileOfADeadHolder: a lock file left by a holder
// that died (its "pid host" line) is a lock file, taken over.
func TestLockReusesTheLockFileOfADeadHolder(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "log.jsonl")
	require.NoError(t, os.WriteFile(log+".lock", []byte("4194999 elsewhere.example\n"), 0o644))
	w, _, err := jsonl.Open(log, nil)
	require.NoError(t, err)
	require.NoError(t, w.Close(context.Background()))
}
