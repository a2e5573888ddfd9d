package eval_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sink"
)

// outcomeEval answers by its input: "pass", "fail", "error" (a harness
// error) or "unscored" (a judge that cannot decide), so that an earlier
// run's outcomes are what a test says.
func outcomeEval(c *calls, inputs ...string) *eval.Eval[string, string] {
	var d dataset.Slice[string]
	for i, in := range inputs {
		tier := "easy"
		if i%2 == 1 {
			tier = "hard"
		}
		d = append(d, dataset.Sample[string]{ID: "s" + strconv.Itoa(i), Input: in, Tags: map[string]string{"tier": tier}})
	}
	h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		c.add(&c.harness, ep.Sample.ID, ep.Epoch)
		if ep.Sample.Input == "error" {
			return "", errors.New("sandbox died")
		}
		return ep.Sample.Input, nil
	})
	j := judge.Func[string, string](func(_ context.Context, _ *harness.Episode[string], out string) (judge.Verdict, error) {
		if out == "unscored" {
			return judge.Verdict{}, judge.Unscored("no grade")
		}
		return judge.Verdict{Pass: out == "pass"}, nil
	})
	return &eval.Eval[string, string]{Name: "outcomes", Dataset: d, Harness: h, Judge: j}
}

// TestSelectionsRunOnlyWhatTheyName runs, after an earlier run, each
// selection of samples, and checks the episodes that ran: every epoch of
// each selected sample, and nothing else.
func TestSelectionsRunOnlyWhatTheyName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := &calls{}
	// s0 pass, s1 fail, s2 error, s3 unscored, s4 pass, s5 fail
	e := outcomeEval(c, "pass", "fail", "error", "unscored", "pass", "fail")
	from := filepath.Join(dir, "from.jsonl")
	_, err := e.Run(context.Background(), eval.Config{Epochs: 2, Retries: -1, Log: from})
	require.NoError(t, err)

	// A baseline in which s0 failed and s1 passed: those two flipped.
	base := outcomeEval(&calls{}, "fail", "pass", "error", "unscored", "pass", "fail")
	baseLog := filepath.Join(dir, "base.jsonl")
	_, err = base.Run(context.Background(), eval.Config{Epochs: 2, Retries: -1, Log: baseLog})
	require.NoError(t, err)

	cases := []struct {
		name string
		sel  eval.Selection
		want []string
	}{
		{"failed", eval.Selection{From: from, Status: []sink.Status{sink.Fail}}, []string{"s1", "s5"}},
		{"errored", eval.Selection{From: from, Status: []sink.Status{sink.Error}}, []string{"s2"}},
		{"unscored", eval.Selection{From: from, Status: []sink.Status{sink.Unscored}}, []string{"s3"}},
		{"failed or errored", eval.Selection{From: from, Status: []sink.Status{sink.Fail, sink.Error}}, []string{"s1", "s2", "s5"}},
		{"tag", eval.Selection{Tags: map[string]string{"tier": "hard"}}, []string{"s1", "s3", "s5"}},
		{"failed with a tag", eval.Selection{From: from, Status: []sink.Status{sink.Fail}, Tags: map[string]string{"tier": "hard"}}, []string{"s1", "s5"}},
		{"flipped", eval.Selection{From: from, FlippedAgainst: baseLog}, []string{"s0", "s1"}},
		{"from alone", eval.Selection{From: from}, []string{"s0", "s1", "s2", "s3", "s4", "s5"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &calls{}
			e := outcomeEval(c, "pass", "fail", "error", "unscored", "pass", "fail")
			sel := tc.sel
			rep, err := e.Run(context.Background(), eval.Config{Epochs: 3, Retries: -1, Select: &sel,
				Log: filepath.Join(t.TempDir(), "new.jsonl")})
			require.NoError(t, err)
			h, _ := c.reset()
			require.Empty(t, cmp.Diff(keys(0, 3, tc.want...), h), "(-want +got)")
			require.Equal(t, 3*len(tc.want), rep.Episodes)
		})
	}
}

// TestSelectedRunPairsWithTheRunItCameFrom: after a fix, the failures
// run again and the comparison with the earlier run covers only them.
func TestSelectedRunPairsWithTheRunItCameFrom(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := &calls{}
	e := outcomeEval(c, "pass", "fail", "pass", "fail", "pass", "fail")
	from := filepath.Join(dir, "from.jsonl")
	_, err := e.Run(context.Background(), eval.Config{Log: from})
	require.NoError(t, err)

	fixed := outcomeEval(c, "pass", "pass", "pass", "pass", "pass", "fail")
	rep, err := fixed.Run(context.Background(), eval.Config{Log: filepath.Join(dir, "rerun.jsonl"),
		Select: &eval.Selection{From: from, Status: []sink.Status{sink.Fail}}})
	require.NoError(t, err)
	cmpd, err := eval.CompareFrom(from, rep, nil)
	require.NoError(t, err)
	require.Equal(t, 3, cmpd.Paired, "paired over the samples run again")
	require.Empty(t, cmpd.OnlyBase, "the samples left out are not missing")
	require.Equal(t, 2, cmpd.Improvements, "two failures fixed")
}

// TestNothingSelected is an error a caller can tell apart: nothing failed.
func TestNothingSelected(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := outcomeEval(&calls{}, "pass", "pass")
	from := filepath.Join(dir, "from.jsonl")
	_, err := e.Run(context.Background(), eval.Config{Log: from})
	require.NoError(t, err)
	_, err = e.Run(context.Background(), eval.Config{Select: &eval.Selection{From: from, Status: []sink.Status{sink.Fail}}})
	require.ErrorIs(t, err, eval.ErrNothingSelected)
	require.Contains(t, err.Error(), "-only fail")
}

func TestSelectionAndSubsetValidation(t *testing.T) {
	t.Parallel()
	e := outcomeEval(&calls{}, "pass")
	for _, cfg := range []eval.Config{
		{Select: &eval.Selection{}},
		{Select: &eval.Selection{Status: []sink.Status{sink.Fail}}},
		{Select: &eval.Selection{FlippedAgainst: "base.jsonl"}},
		{Select: &eval.Selection{From: "x.jsonl", Status: []sink.Status{"failed"}}},
		{Subset: eval.Subset{PerValue: -1}},
	} {
		_, err := e.Run(context.Background(), cfg)
		var ce *eval.ConfigError
		require.ErrorAs(t, err, &ce, "%+v", cfg)
	}
	_, err := e.Run(context.Background(), eval.Config{Select: &eval.Selection{From: filepath.Join(t.TempDir(), "missing.jsonl")}})
	require.ErrorContains(t, err, "missing.jsonl")
}

// TestSmokeSubsetIsStratifiedAndStable: PerValue samples of each tag
// value, the same ones for the same seed.
func TestSmokeSubsetIsStratifiedAndStable(t *testing.T) {
	t.Parallel()
	inputs := make([]string, 40)
	for i := range inputs {
		inputs[i] = "pass"
	}
	ran := func(seed uint64) []string {
		c := &calls{}
		e := outcomeEval(c, inputs...)
		rep, err := e.Run(context.Background(), eval.Config{Subset: eval.Subset{Tag: "tier", PerValue: 3, Seed: seed}})
		require.NoError(t, err)
		require.Len(t, rep.ByTag, 1)
		for _, g := range rep.ByTag[0].Groups {
			require.Equal(t, 3, g.Samples, "tier %s", g.Value)
		}
		h, _ := c.reset()
		var ids []string
		for k := range h {
			ids = append(ids, k.SampleID)
		}
		slices.Sort(ids)
		return ids
	}
	a := ran(1)
	require.Len(t, a, 6)
	require.Equal(t, a, ran(1), "the same seed draws the same samples")
	require.NotEqual(t, a, ran(2))
}
