package eval_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/history"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/sandboxtest"
)

// limitsEval is an eval whose samples' sandboxes have memory bytes of
// memory.
func limitsEval(memory int64) *eval.Eval[string, string] {
	return &eval.Eval[string, string]{Name: "limits", Dataset: samples("a", "b"),
		Harness: harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) { return ep.Sample.Input, nil }),
		Judge: judge.Func[string, string](func(context.Context, *harness.Episode[string], string) (judge.Verdict, error) {
			return judge.Pass(""), nil
		}),
		Sandbox: func(dataset.Sample[string]) sandbox.Spec {
			return sandbox.Spec{Image: "python:3.12", Limits: sandbox.Limits{MemoryBytes: memory}}
		}}
}

// A run's sandbox limits are on record: a resume under other limits is
// refused, naming them, unless allowed; a comparison across them warns.
func TestResumeUnderOtherResourcesIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	cfg := eval.Config{Log: log, Sandbox: sandbox.NewProvider(&sandboxtest.Fake{}, nil), Quiet: true}
	_, err := limitsEval(1<<30).Run(context.Background(), cfg)
	require.NoError(t, err)
	m, err := manifest.Read(log)
	require.NoError(t, err)
	require.Equal(t, []string{"memory=1073741824 image=python:3.12"}, m.Resources)
	for _, r := range logRecords(t, log) {
		require.Equal(t, "memory=1073741824 image=python:3.12", r.Resources, "each record names its sandbox's resources, as the manifest does")
	}

	_, err = limitsEval(2<<30).Run(context.Background(), cfg)
	var mm *manifest.MismatchError
	require.True(t, errors.As(err, &mm), "a resume under twice the memory: %v", err)
	require.Contains(t, err.Error(), `sandbox resources: [memory=1073741824 image=python:3.12] in the log, [memory=2147483648 image=python:3.12] now`)

	allowed := cfg
	allowed.AllowChanged = true
	_, err = limitsEval(2<<30).Run(context.Background(), allowed)
	require.NoError(t, err, "AllowChanged resumes it knowingly")

	other := cfg
	other.Log = filepath.Join(dir, "other.jsonl")
	_, err = limitsEval(1<<30).Run(context.Background(), other)
	require.NoError(t, err)
	c, err := report.CompareLogs(other.Log, log, nil)
	require.NoError(t, err)
	var flagged []string
	for _, w := range c.Warnings {
		if strings.Contains(w, "environments differ") {
			flagged = append(flagged, w)
		}
	}
	require.Equal(t, []string{"the runs' environments differ: sandbox resources [memory=1073741824 image=python:3.12] → [memory=2147483648 image=python:3.12]: a possible cause of any difference, not the agent"}, flagged)
	require.Contains(t, c.String(), "environments differ")
}

// History's drift names a change of the sandbox's resources as a
// possible cause: the same agent, twice the memory, every sample flipped.
func TestDriftNamesAChangeOfResources(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var ins []string
	for range 30 {
		ins = append(ins, "x")
	}
	run := func(name string, memory int64, pass bool) string {
		e := limitsEval(memory)
		e.Dataset = samples(ins...)
		e.Versions = eval.Versions{Harness: "h1", Judge: "j1"}
		e.Judge = judge.Func[string, string](func(context.Context, *harness.Episode[string], string) (judge.Verdict, error) {
			return judge.Verdict{Pass: pass}, nil
		})
		log := filepath.Join(dir, name+".jsonl")
		_, err := e.Run(context.Background(), eval.Config{Log: log, Sandbox: sandbox.NewProvider(&sandboxtest.Fake{}, nil), Quiet: true})
		require.NoError(t, err)
		return log
	}
	baseLog, headLog := run("base", 2<<30, true), run("head", 1<<30, false)
	base, _, err := history.Read(baseLog, nil)
	require.NoError(t, err)
	head, _, err := history.Read(headLog, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"resources"}, history.Changes(base, head))
	d, err := history.CompareLogs(base, head, 0)
	require.NoError(t, err)
	require.True(t, d.Alert, d.String())
	require.Contains(t, d.Cause, "the environment changed: sandbox resources [memory=2147483648 image=python:3.12] → [memory=1073741824 image=python:3.12] (a possible cause)")
}
