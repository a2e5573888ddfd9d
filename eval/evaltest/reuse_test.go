package evaltest_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/evaltest"
)

// logger is a testing.TB that keeps what the test logs.
type logger struct {
	testing.TB
	mu   sync.Mutex
	logs []string
}

func (l *logger) Logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.logs = append(l.logs, fmt.Sprintf(format, args...))
}

func (l *logger) Helper() {}

// TestGateSaysWhatItReused: a gate passed on earlier results says so in
// the go test output.
func TestGateSaysWhatItReused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := arithmetic(adder(-1))
	e.Versions = eval.Versions{Harness: "v1", Judge: "v1"}
	nightly := filepath.Join(dir, "nightly.jsonl")
	evaltest.Run(t, e, eval.Config{Log: nightly}, evaltest.Gate{MinLowerBound: 0.9})

	l := &logger{TB: t}
	rep := evaltest.Run(l, e, eval.Config{Log: filepath.Join(dir, "pr.jsonl"), ReuseFrom: []string{nightly}}, evaltest.Gate{MinLowerBound: 0.9})
	require.Equal(t, 200, rep.Reused)
	out := strings.Join(l.logs, "\n")
	require.Contains(t, out, "(200 of 200 episodes reused from earlier runs)")
	require.Contains(t, out, "200 episodes (earlier results reused, not run again)")

	e.Versions.Judge = "v2"
	l = &logger{TB: t}
	rep = evaltest.Run(l, e, eval.Config{Log: filepath.Join(dir, "judge2.jsonl"), ReuseFrom: []string{nightly}}, evaltest.Gate{MinLowerBound: 0.9})
	require.Equal(t, 200, rep.Rejudged)
	require.Contains(t, strings.Join(l.logs, "\n"), "(0 of 200 episodes reused from earlier runs, 200 earlier outputs judged again)")
}
