package eval_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/cli"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// spender is an eval whose agent spends agent[id] tokens (at $0.0001
// each, on model "agent-x") per attempt, failing its first attempt when
// failFirst[id], and whose judge spends judge[id] tokens on "grader-y"
// and passes.
func spender(agent, judgeTokens map[string]int64, failFirst map[string]bool, judged *atomic.Int32) *eval.Eval[string, string] {
	var d dataset.Slice[string]
	for id := range agent {
		d = append(d, dataset.Sample[string]{ID: id, Input: id, Tags: map[string]string{"tier": id[:1]}})
	}
	h := harness.Func[string, string](func(_ context.Context, ep *harness.Episode[string]) (string, error) {
		n := agent[ep.Sample.ID]
		ep.AddEvent(harness.Event{Kind: "model", Usage: harness.Usage{InputTokens: n, CostUSD: float64(n) * 1e-4, Model: "agent-x"}})
		if failFirst[ep.Sample.ID] && ep.Attempt == 0 {
			return "", errors.New("agent API: 502")
		}
		return "ok", nil
	})
	j := judge.Func[string, string](func(_ context.Context, ep *harness.Episode[string], _ string) (judge.Verdict, error) {
		judged.Add(1)
		n := judgeTokens[ep.Sample.ID]
		ep.AddEvent(harness.Event{Kind: "judge", Usage: harness.Usage{InputTokens: n, OutputTokens: 1, CostUSD: float64(n) * 1e-5, Model: "grader-y"}})
		return judge.Pass("fine"), nil
	})
	return &eval.Eval[string, string]{Name: "spend", Dataset: d, Harness: h, Judge: j}
}

func records(t *testing.T, log string) map[string]sink.Record {
	t.Helper()
	out := map[string]sink.Record{}
	for r, err := range jsonl.Records(log) {
		require.NoError(t, err)
		out[r.SampleID] = r
	}
	return out
}

// TestEpisodeOverItsCapEndsAsLimit: an episode past Config.MaxEpisodeTokens,
// agent and judge together over all its attempts, ends as an error of
// kind limit holding what it spent, is not retried, and is not judged
// when its agent alone passed the cap.
func TestEpisodeOverItsCapEndsAsLimit(t *testing.T) {
	t.Parallel()
	var judged atomic.Int32
	e := spender(
		map[string]int64{"agent-over": 1200, "judge-over": 900, "retried-over": 600, "within": 300},
		map[string]int64{"agent-over": 100, "judge-over": 200, "retried-over": 100, "within": 100},
		map[string]bool{"retried-over": true}, &judged)
	log := filepath.Join(t.TempDir(), "run.jsonl")
	rep, err := e.Run(t.Context(), eval.Config{Log: log, Retries: 3, Backoff: time.Millisecond, MaxEpisodeTokens: 1000, Quiet: true, MaxErrorRate: -1})
	require.NoError(t, err)
	recs := records(t, log)

	r := recs["agent-over"]
	require.Equal(t, sink.Error, r.Status)
	require.Equal(t, sink.KindLimit, r.ErrorKind)
	require.Equal(t, "harness", r.ErrorSource)
	require.Equal(t, 0, r.Attempt, "not retried")
	require.Equal(t, int64(1200), r.InputTokens, "what it spent")
	require.Zero(t, r.JudgeInputTokens, "not judged")
	require.Contains(t, r.Error, "1200 tokens over Config.MaxEpisodeTokens 1000")

	r = recs["judge-over"]
	require.Equal(t, sink.KindLimit, r.ErrorKind)
	require.Equal(t, "judge", r.ErrorSource)
	require.Equal(t, int64(1100), r.InputTokens)
	require.Equal(t, int64(200), r.JudgeInputTokens)
	require.Contains(t, r.Error, "agent 900 tokens")

	r = recs["retried-over"] // 600 in the failed attempt, 600 + 100 in the second
	require.Equal(t, sink.KindLimit, r.ErrorKind)
	require.Equal(t, 1, r.Attempt)
	require.Equal(t, int64(1200), r.InputTokens, "over all its attempts")

	require.Equal(t, sink.Pass, recs["within"].Status)
	require.Equal(t, int32(2), judged.Load(), "only within and judge-over reached the judge")
	require.Equal(t, 3, rep.Errored)
	require.Len(t, rep.ErrorSources, 2)

	// A cost cap works alike: $0.05 stops all but within ($0.031).
	judged.Store(0)
	log = filepath.Join(t.TempDir(), "run.jsonl")
	_, err = e.Run(t.Context(), eval.Config{Log: log, Retries: -1, MaxEpisodeCostUSD: 0.05, Quiet: true, MaxErrorRate: -1})
	require.NoError(t, err)
	recs = records(t, log)
	require.Equal(t, sink.KindLimit, recs["agent-over"].ErrorKind)
	require.Contains(t, recs["agent-over"].Error, "$0.1200 over Config.MaxEpisodeCostUSD $0.0500")
	require.Equal(t, sink.Pass, recs["within"].Status)
}

// TestTokenBudgetStopsTheRun: Config.MaxTokens stops scheduling once the
// attempts made have used it, as MaxCostUSD does; the report says so and
// the command exits 1.
func TestTokenBudgetStopsTheRun(t *testing.T) {
	t.Parallel()
	agent, judgeTokens := map[string]int64{}, map[string]int64{}
	for i := range 100 {
		id := fmt.Sprintf("s%03d", i)
		agent[id], judgeTokens[id] = 99, 0 // 100 tokens an episode, the judge's output token included
	}
	var judged atomic.Int32
	e := spender(agent, judgeTokens, nil, &judged)
	log := filepath.Join(t.TempDir(), "run.jsonl")
	rep, err := e.Run(t.Context(), eval.Config{Log: log, Concurrency: 2, MaxTokens: 1000, Quiet: true})
	require.NoError(t, err)
	require.True(t, rep.BudgetExhausted)
	require.GreaterOrEqual(t, rep.Episodes, 10)
	require.LessOrEqual(t, rep.Episodes, 12, "at most the 2 in flight past the budget")

	var out, errOut bytes.Buffer
	code := cli.MainArgs(t.Context(), e, eval.Config{}, []string{"-log", filepath.Join(t.TempDir(), "main.jsonl"), "-max-tokens", "500", "-concurrency", "1", "-quiet"}, &out, &errOut)
	require.Equal(t, 1, code)
	require.Contains(t, errOut.String(), "-max-tokens")
}

// TestUsageByRoleTagAndModel: records split usage between agent and
// judge over every attempt and name their models; the report splits
// cost by role, by tag and by model.
func TestUsageByRoleTagAndModel(t *testing.T) {
	t.Parallel()
	var judged atomic.Int32
	e := spender(map[string]int64{"a1": 100, "a2": 200, "b1": 400}, map[string]int64{"a1": 10, "a2": 20, "b1": 40},
		map[string]bool{"b1": true}, &judged)
	log := filepath.Join(t.TempDir(), "run.jsonl")
	rep, err := e.Run(t.Context(), eval.Config{Log: log, Retries: 1, Backoff: time.Millisecond, Quiet: true})
	require.NoError(t, err)
	recs := records(t, log)
	b1 := recs["b1"] // its first attempt's agent usage counts too
	require.Equal(t, int64(800+40), b1.InputTokens)
	require.Equal(t, int64(40), b1.JudgeInputTokens)
	require.Equal(t, int64(1), b1.JudgeOutputTokens)
	require.InDelta(t, 0.0004, b1.JudgeCostUSD, 1e-12)
	require.InDelta(t, 0.08+0.0004, b1.CostUSD, 1e-12)
	require.Equal(t, "agent-x", b1.Model)
	require.Equal(t, "grader-y", b1.JudgeModel)

	require.Equal(t, int64(70), rep.JudgeUsage.InputTokens)
	require.InDelta(t, 0.0007, rep.JudgeUsage.CostUSD, 1e-12)
	require.Equal(t, []report.ModelUsage{
		{Role: "agent", Model: "agent-x", Usage: harness.Usage{InputTokens: 1100, CostUSD: 0.11}},
		{Role: "judge", Model: "grader-y", Usage: harness.Usage{InputTokens: 70, OutputTokens: 3, CostUSD: 0.0007}},
	}, roundUsage(rep.ByModel))
	costs := map[string]float64{}
	for _, g := range rep.ByTag[0].Groups {
		costs[g.Value] = g.CostUSD
	}
	require.InDelta(t, 0.0303, costs["a"], 1e-12)
	require.InDelta(t, 0.0804, costs["b"], 1e-12)
	text := rep.String()
	require.Contains(t, text, "agent 1100 tokens $0.1100, judge 73 tokens $0.0007")
	require.Contains(t, text, "usage by model")
	require.Regexp(t, `judge\s+grader-y\s+70\s+3\s+\$0\.0007`, text)
}

func roundUsage(ms []report.ModelUsage) []report.ModelUsage {
	for i := range ms {
		ms[i].Usage.CostUSD = float64(int64(ms[i].Usage.CostUSD*1e8+0.5)) / 1e8
	}
	return ms
}

// TestOldLogReportsAsBefore: a log written before the new fields reads
// into the same report as before: no worst case without errors, no
// split of usage, and errors whose source was not recorded are counted
// as such.
func TestOldLogReportsAsBefore(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "old.jsonl")
	lines := `{"schema":1,"run_id":"r","eval":"old","sample_id":"s1","epoch":0,"attempt":0,"status":"pass","score":1,"started_at":"2025-06-01T12:00:00Z","duration_ms":10,"input_tokens":100,"output_tokens":10,"cost_usd":0.01,"seed":1}
{"schema":1,"run_id":"r","eval":"old","sample_id":"s2","epoch":0,"attempt":0,"status":"fail","score":0,"reason":"wrong","started_at":"2025-06-01T12:00:00Z","duration_ms":10,"input_tokens":100,"output_tokens":10,"cost_usd":0.01,"seed":2}
`
	require.NoError(t, writeFile(log, lines))
	rep, err := report.FromRecords(jsonl.Records(log), nil)
	require.NoError(t, err)
	require.Nil(t, rep.WorstCase)
	require.Empty(t, rep.ErrorSources)
	require.Zero(t, rep.JudgeUsage)
	require.Empty(t, rep.ByModel)
	text := rep.String()
	require.True(t, strings.HasPrefix(text, "eval old  run r\nmetric "), text)
	require.NotContains(t, text, "worst case")
	require.NotContains(t, text, "by role")

	require.NoError(t, writeFile(log, lines+`{"schema":1,"run_id":"r","eval":"old","sample_id":"s3","epoch":0,"attempt":2,"status":"error","score":0,"error":"judge: rubric: openai: HTTP 503","error_kind":"judge","started_at":"2025-06-01T12:00:00Z","duration_ms":10,"input_tokens":0,"output_tokens":0,"cost_usd":0,"seed":3}
`))
	rep, err = report.FromRecords(jsonl.Records(log), nil)
	require.NoError(t, err)
	require.Equal(t, []report.ErrorSource{{Status: sink.Error, Kind: sink.KindJudge, Count: 1, First: "judge: rubric: openai: HTTP 503", SampleID: "s3"}}, rep.ErrorSources)
	require.Contains(t, rep.String(), "(not recorded)")
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }

// TestErrorSourceNamesTheStage: an error's record says where it came
// from: the harness (an error, a panic, a timeout there), the judge and
// its path through the combinators, a sandbox that could not be had.
func TestErrorSourceNamesTheStage(t *testing.T) {
	t.Parallel()
	d := dataset.Slice[string]{{ID: "harness-error", Input: "x"}, {ID: "harness-panic", Input: "x"},
		{ID: "harness-timeout", Input: "x"}, {ID: "judge-error", Input: "x"}, {ID: "judge-panic", Input: "x"},
		{ID: "unscored", Input: "x"}, {ID: "judge-timeout", Input: "x"}, {ID: "fine", Input: "x"}}
	h := harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
		switch ep.Sample.ID {
		case "harness-error":
			return "", errors.New("agent API: 500")
		case "harness-panic":
			panic("agent bug")
		case "harness-timeout":
			<-ctx.Done()
			return "", ctx.Err()
		}
		return ep.Sample.ID, nil
	})
	cheap := judge.Func[string, string](func(context.Context, *harness.Episode[string], string) (judge.Verdict, error) {
		return judge.Fail("suspect"), nil
	})
	grader := judge.Func[string, string](func(ctx context.Context, _ *harness.Episode[string], out string) (judge.Verdict, error) {
		switch out {
		case "judge-timeout":
			time.Sleep(200 * time.Millisecond) // ignores its context: abandoned
			return judge.Verdict{}, ctx.Err()
		case "judge-error":
			return judge.Verdict{}, errors.New("grader: HTTP 503")
		case "judge-panic":
			panic("grader bug")
		case "unscored":
			return judge.Verdict{}, judge.Unscored("no grade")
		}
		return judge.Pass("ok"), nil
	})
	e := &eval.Eval[string, string]{Name: "stages", Dataset: d, Harness: h,
		Judge: judge.Cascade(cheap, judge.Named("grader", grader), judge.PassSettles)}
	log := filepath.Join(t.TempDir(), "run.jsonl")
	rep, err := e.Run(t.Context(), eval.Config{Log: log, Retries: -1, Timeout: 50 * time.Millisecond, Quiet: true, MaxErrorRate: -1})
	require.NoError(t, err)
	got := map[string]string{}
	for id, r := range records(t, log) {
		got[id] = string(r.Status) + "/" + string(r.ErrorKind) + " " + r.ErrorSource
	}
	require.Equal(t, map[string]string{
		"harness-error":   "error/harness harness",
		"harness-panic":   "error/panic harness",
		"harness-timeout": "error/timeout harness",
		"judge-error":     "error/judge judge/cascade.expensive/grader",
		"judge-panic":     "error/panic judge",
		"unscored":        "unscored/ judge/cascade.expensive/grader",
		"judge-timeout":   "error/timeout judge",
		"fine":            "pass/ ",
	}, got)
	require.Len(t, rep.ErrorSources, 7)
}

// TestRunawayAgentIsStoppedAtItsCap: an agent that spends in a loop
// until its context ends is stopped while it runs, soon after its
// episode passes MaxEpisodeTokens, and its record is a limit error with
// what it spent.
func TestRunawayAgentIsStoppedAtItsCap(t *testing.T) {
	t.Parallel()
	h := harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
		for ctx.Err() == nil {
			ep.AddEvent(harness.Event{Kind: "model", Usage: harness.Usage{InputTokens: 100, Model: "loop"}})
			time.Sleep(5 * time.Millisecond)
		}
		return "", ctx.Err()
	})
	j := judge.Func[string, string](func(context.Context, *harness.Episode[string], string) (judge.Verdict, error) {
		t.Error("a runaway agent was judged")
		return judge.Pass(""), nil
	})
	e := &eval.Eval[string, string]{Name: "runaway", Dataset: dataset.Slice[string]{{ID: "loop", Input: "x"}}, Harness: h, Judge: j}
	log := filepath.Join(t.TempDir(), "run.jsonl")
	start := time.Now()
	_, err := e.Run(t.Context(), eval.Config{Log: log, MaxEpisodeTokens: 1000, Quiet: true})
	require.NoError(t, err)
	require.Less(t, time.Since(start), 10*time.Second, "stopped long before the 30-minute timeout")
	r := records(t, log)["loop"]
	require.Equal(t, sink.KindLimit, r.ErrorKind)
	require.Equal(t, 0, r.Attempt, "not retried")
	require.Greater(t, r.InputTokens, int64(1000))
	require.Equal(t, "loop", r.Model)
	require.Contains(t, r.Error, fmt.Sprintf("%d tokens over Config.MaxEpisodeTokens 1000", r.InputTokens))
}
