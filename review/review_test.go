package review_test

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/internal/filelock"
	"github.com/proctor-evals/proctor/review"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func rv(sample string, epoch int, reviewer string, pass bool, at int) review.Review {
	return review.Review{SampleID: sample, Epoch: epoch, Reviewer: reviewer, Pass: pass, Time: t0.Add(time.Duration(at) * time.Minute)}
}

func TestAppendReadFinal(t *testing.T) {
	t.Parallel()
	path := review.FilePath(filepath.Join(t.TempDir(), "run.jsonl"))
	w, torn, err := review.Open(path)
	require.NoError(t, err)
	require.Nil(t, torn)
	score := 0.25
	first := rv("a", 0, "ana", true, 0)
	first.Score, first.Note, first.SawVerdict = &score, "looks \"fine\"\nmostly", true
	require.NoError(t, w.Append(first, rv("a", 0, "bo", false, 1)))
	require.NoError(t, w.Append(rv("a", 0, "ana", false, 2))) // ana changes her mind
	require.NoError(t, w.Append(rv("b", 1, "ana", true, 3)))
	err = w.Append(review.Review{SampleID: "c", Reviewer: " ", Time: t0})
	require.ErrorContains(t, err, "no reviewer")
	require.NoError(t, w.Close())

	got, torn, err := review.Read(path)
	require.NoError(t, err)
	require.Nil(t, torn)
	require.Len(t, got, 4, "nothing is overwritten")
	assert.Equal(t, first.Note, got[0].Note)
	assert.Equal(t, 0.25, *got[0].Score)
	assert.True(t, got[0].SawVerdict)

	final := review.Final(got)
	require.Len(t, final, 3)
	assert.Equal(t, []string{"ana", "bo", "ana"}, []string{final[0].Reviewer, final[1].Reviewer, final[2].Reviewer})
	assert.False(t, final[0].Pass, "ana's last word counts")
	assert.Equal(t, map[review.Key]float64{{SampleID: "a"}: 0, {SampleID: "b", Epoch: 1}: 1}, review.Grade(final))

	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(b), `{"review":1,"sample_id":"a","epoch":0,"reviewer":"ana"`), string(b))
}

func TestOneWriterAtATime(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "r.jsonl")
	w, _, err := review.Open(path)
	require.NoError(t, err)
	_, _, err = review.Open(path)
	var locked *filelock.LockedError
	require.ErrorAs(t, err, &locked)
	require.NoError(t, w.Close())
	w, _, err = review.Open(path)
	require.NoError(t, err)
	require.NoError(t, w.Close())
}

// TestTornTailIsCut: what a killed writer leaves (a line cut short, or a
// complete last line that does not parse) is reported by Read, skipped,
// and cut by Open; garbage elsewhere is an error naming file and line,
// and nothing is cut.
func TestTornTailIsCut(t *testing.T) {
	t.Parallel()
	good := `{"review":1,"sample_id":"a","epoch":0,"reviewer":"ana","time":"2026-11-25T12:00:00Z","pass":true,"saw_verdict":false}` + "\n"
	for name, tail := range map[string]string{
		"cut short":       `{"review":1,"sample_id":"b","ep`,
		"prefix":          `{"rev`,
		"complete broken": `{"review":1,"sample_id":"b","epoch":0,"rev` + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "r.jsonl")
			require.NoError(t, os.WriteFile(path, []byte(good+tail), 0o644))
			got, torn, err := review.Read(path)
			require.NoError(t, err)
			require.Len(t, got, 1)
			require.NotNil(t, torn)
			assert.Equal(t, 2, torn.Line)
			assert.Equal(t, int64(len(good)), torn.Offset)
			w, torn, err := review.Open(path)
			require.NoError(t, err)
			require.NotNil(t, torn)
			require.NoError(t, w.Append(rv("c", 0, "bo", false, 5)))
			require.NoError(t, w.Close())
			got, torn, err = review.Read(path)
			require.NoError(t, err)
			require.Nil(t, torn)
			require.Len(t, got, 2)
			assert.Equal(t, "c", got[1].SampleID)
		})
	}
	for name, content := range map[string]string{
		"garbage line":     good + "hello\n" + good,
		"bad review":       good + `{"review":1,"sample_id":"","epoch":0,"reviewer":"x","time":"2026-11-25T12:00:00Z","pass":true}` + "\n",
		"other version":    good + `{"review":2,"sample_id":"a","epoch":0,"reviewer":"x","time":"2026-11-25T12:00:00Z","pass":true}` + "\n",
		"broken in middle": good + `{"review":1,"sample_id":"b"` + "\n" + good,
		"garbage tail":     good + "not a review",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "r.jsonl")
			require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
			_, _, err := review.Read(path)
			var le *review.LineError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, path, le.Path)
			assert.Equal(t, 2, le.Line)
			assert.Contains(t, err.Error(), path+":2")
			_, _, err = review.Open(path)
			require.ErrorAs(t, err, &le)
			b, _ := os.ReadFile(path)
			assert.Equal(t, content, string(b), "nothing is cut")
		})
	}
}

// The kill test runs this test binary as a child that appends reviews with
// long notes (writes of 512 KiB, which SIGKILL can cut short)
// and prints each review's number once Append has returned.
const killChildEnv = "PROCTOR_REVIEW_KILL_CHILD"

func TestMain(m *testing.M) {
	if path := os.Getenv(killChildEnv); path != "" {
		killChild(path)
		return
	}
	if path := os.Getenv(fullChildEnv); path != "" {
		fullChild(path)
		return
	}
	os.Exit(m.Run())
}

func killChild(path string) {
	w, _, err := review.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	note := strings.Repeat("n", 512<<10)
	for i := 0; ; i++ {
		r := rv("s"+strconv.Itoa(os.Getpid())+"-"+strconv.Itoa(i), 0, "child", i%2 == 0, i)
		r.Note = note
		if err := w.Append(r); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(r.SampleID)
	}
}

// killMidWrite returns once the file at path is seen without its last
// newline (a write under way), or after two seconds.
func killMidWrite(t *testing.T, path string) {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var last [1]byte
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		st, err := f.Stat()
		require.NoError(t, err)
		if n := st.Size(); n > 0 {
			if _, err := f.ReadAt(last[:], n-1); err == nil && last[0] != '\n' {
				return
			}
		}
	}
}

// TestSurvivesKill9: a writer killed with SIGKILL, again and again, half
// the time while a write is under way (the file does not end with a
// newline) and half at a random moment, loses no review whose Append
// returned; what it was writing is a torn tail that the next Open cuts;
// the file reads clean at the end.
func TestSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	t.Parallel()
	// On tmpfs, where fsync costs nothing, the child spends its time in
	// write(2), so that kills land mid-write.
	dir := t.TempDir()
	if shm, err := os.MkdirTemp("/dev/shm", "review-kill-"); err == nil {
		dir = shm
		t.Cleanup(func() { os.RemoveAll(shm) })
	}
	path := filepath.Join(dir, "run.jsonl.reviews.jsonl")
	acked := map[string]bool{}
	torn := 0
	const rounds = 6
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), killChildEnv+"="+path)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		sc := bufio.NewScanner(out)
		for n := 0; n < 2 && sc.Scan(); n++ { // acknowledged appends before the kill
			acked[sc.Text()] = true
		}
		if round%2 == 0 {
			killMidWrite(t, path) // while the file ends without a newline
		} else {
			time.Sleep(time.Duration(rng.IntN(3_000)) * time.Microsecond) // anywhere
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		for sc.Scan() { // what it acknowledged before it died
			acked[sc.Text()] = true
		}
		err = cmd.Wait()
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "the child was killed: %v", err)
		_, tt, err := review.Read(path)
		require.NoError(t, err, "only a torn tail may follow the committed reviews")
		if tt != nil {
			torn++
		}
	}
	t.Logf("%d of %d kills left a torn tail", torn, rounds)
	require.Positive(t, torn, "half the kills wait for a write in progress")
	w, _, err := review.Open(path)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	got, tt, err := review.Read(path)
	require.NoError(t, err)
	require.Nil(t, tt, "Open cut the torn tail")
	have := map[string]bool{}
	for _, r := range got {
		have[r.SampleID] = true
	}
	for id := range acked {
		require.True(t, have[id], "acknowledged review %s lost", id)
	}
	require.GreaterOrEqual(t, len(acked), 2*rounds)
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }

// The full-disk test runs this test binary as a child whose file size
// limit (RLIMIT_FSIZE) stands for a full disk: a write past it is cut
// short, as on a full disk, and fails.
const fullChildEnv = "PROCTOR_REVIEW_FULL_CHILD"

func fullChild(path string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	signal.Ignore(syscall.SIGXFSZ)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		fail(err)
	}
	w, _, err := review.Open(path)
	if err != nil {
		fail(err)
	}
	if err := w.Append(rv("a", 0, "ana", true, 0)); err != nil {
		fail(err)
	}
	full := lim
	full.Cur = 4096
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &full); err != nil {
		fail(err)
	}
	long := rv("b", 0, "ana", false, 1)
	long.Note = strings.Repeat("n", 8192)
	if err := w.Append(long); err == nil {
		fail(errors.New("a write past the limit did not fail"))
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil { // space again
		fail(err)
	}
	if err := w.Append(rv("c", 0, "ana", true, 2)); err != nil {
		fail(err)
	}
	if err := w.Close(); err != nil {
		fail(err)
	}
}

// TestFullDiskLeavesNoHalfLine: a review whose write a full disk cut short
// leaves nothing behind it; the next review is a line of its own and the
// file reads.
func TestFullDiskLeavesNoHalfLine(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "run.jsonl.reviews.jsonl")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fullChildEnv+"="+path)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	got, torn, err := review.Read(path)
	require.NoError(t, err)
	require.Nil(t, torn)
	var ids []string
	for _, r := range got {
		ids = append(ids, r.SampleID)
	}
	require.Equal(t, []string{"a", "c"}, ids)
}
