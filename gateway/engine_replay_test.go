package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/local"
	"github.com/proctor-evals/proctor/sink"
)

// TestEngineResumesEpisodesByReplay: a run whose records a crash lost
// (the log cut to nothing; the call store beside it kept) runs its
// episodes again, in new sandboxes, and their agents are answered from
// the call store: the provider sees no call, the episodes end as before
// with the same workspaces, their records count no tokens, and the
// report's Replay counts the calls and the tokens not bought again.
func TestEngineResumesEpisodesByReplay(t *testing.T) {
	const turns = 6
	prov := newProvider(t)
	prov.ToolArguments = `{"path":"notes.txt"}`
	samples := []dataset.Sample[int]{{ID: "a", Input: turns}, {ID: "b", Input: turns - 2}}
	e := &eval.Eval[int, harness.CommandOutput]{
		Name:    "replay",
		Dataset: dataset.Slice[int](samples),
		Harness: harness.Command[int]{Cmd: func(ep *harness.Episode[int]) sandbox.Cmd {
			return sandbox.Cmd{Args: []string{os.Args[0]}, Env: map[string]string{agentEnv: "1", "TURNS": strconv.Itoa(ep.Sample.Input)}, Timeout: time.Minute}
		}},
		Judge: judge.Func[int, harness.CommandOutput](func(_ context.Context, _ *harness.Episode[int], out harness.CommandOutput) (judge.Verdict, error) {
			return judge.Verdict{Pass: out.ExitCode == 0, Reason: out.Stderr}, nil
		}),
		Sandbox: func(dataset.Sample[int]) sandbox.Spec { return sandbox.Spec{} },
	}
	log := filepath.Join(t.TempDir(), "run.jsonl")
	run := func() (map[string]string, map[string][]harness.Event, *report.Report) {
		rep, err := e.Run(context.Background(), eval.Config{Sandbox: local.New(&local.Options{Dir: t.TempDir()}),
			Models: newGateway(t, prov), Log: log, Quiet: true, Concurrency: 2})
		require.NoError(t, err)
		recs, events := logOf(t, log)
		require.Len(t, recs, len(samples))
		digests := map[string]string{}
		for id, r := range recs {
			require.Equal(t, sink.Pass, r.Status, "%s: %s", id, r.Error)
			var out harness.CommandOutput
			require.NoError(t, json.Unmarshal(r.Output, &out))
			digests[id] = strings.TrimSpace(out.Stdout)
		}
		return digests, events, rep
	}
	first, _, rep1 := run()
	require.Len(t, prov.Served(), 2*turns-2)
	require.Nil(t, rep1.Replay)
	require.Greater(t, rep1.Usage.Tokens(), int64(0))

	require.NoError(t, os.Truncate(log, 0)) // the records lost, the call store kept
	again, events, rep2 := run()
	require.Len(t, prov.Served(), 2*turns-2, "a replayed call reached the provider")
	require.Equal(t, first, again, "the same workspaces")
	require.Zero(t, rep2.Usage.Tokens(), "replayed calls cost nothing")
	require.NotNil(t, rep2.Replay)
	require.Equal(t, 2*turns-2, rep2.Replay.Replayed)
	require.Equal(t, rep1.Usage.InputTokens, rep2.Replay.Saved.InputTokens)
	require.Equal(t, rep1.Usage.OutputTokens, rep2.Replay.Saved.OutputTokens)
	require.InDelta(t, rep1.Usage.CostUSD, rep2.Replay.Saved.CostUSD, 1e-12)
	for id, evs := range events {
		for _, ev := range evs {
			if ev.Kind == "model" {
				require.Contains(t, string(ev.Output), `"replay":"replayed"`, id)
			}
		}
	}
	recs, _ := logOf(t, log)
	require.Equal(t, turns, recs["a"].CallsReplayed)
	require.Equal(t, turns-2, recs["b"].CallsReplayed)
	require.Zero(t, recs["a"].ReplayDivergedAt+recs["b"].ReplayDivergedAt, "a deterministic agent does not diverge")
}

// TestTheRecordSaysWhereANondeterministicAgentDiverged: an agent whose
// call 5 (of 8) carries a random nonce, its first attempt failed by its
// harness so that the engine retries it: the retry replays calls 1-4 and
// goes live at call 5, and the record says so (calls_replayed 4,
// replay_diverged_at 5). Run again on the same call store (the records
// lost), both attempts replay and diverge again: the record counts the
// calls replayed by both, and where the first diverged. The report, the
// run's and the log's (proctor report), counts them apart.
func TestTheRecordSaysWhereANondeterministicAgentDiverged(t *testing.T) {
	const turns, nonceAt = 8, 4 // nonceAt counts from 0: call 5
	prov := newProvider(t)
	prov.ToolArguments = `{"path":"notes.txt"}`
	agent := harness.Command[int]{Cmd: func(ep *harness.Episode[int]) sandbox.Cmd {
		return sandbox.Cmd{Args: []string{os.Args[0]}, Env: map[string]string{agentEnv: "1", "TURNS": strconv.Itoa(turns), "NONCE_AT": strconv.Itoa(nonceAt)}, Timeout: time.Minute}
	}}
	e := &eval.Eval[int, harness.CommandOutput]{
		Name:    "diverge",
		Dataset: dataset.Slice[int]([]dataset.Sample[int]{{ID: "a"}}),
		Harness: harness.Func[int, harness.CommandOutput](func(ctx context.Context, ep *harness.Episode[int]) (harness.CommandOutput, error) {
			out, err := agent.Run(ctx, ep)
			if err == nil && ep.Attempt == 0 {
				err = errors.New("the first attempt's sandbox went away")
			}
			return out, err
		}),
		Judge: judge.Func[int, harness.CommandOutput](func(_ context.Context, _ *harness.Episode[int], out harness.CommandOutput) (judge.Verdict, error) {
			return judge.Verdict{Pass: out.ExitCode == 0, Reason: out.Stderr}, nil
		}),
		Sandbox: func(dataset.Sample[int]) sandbox.Spec { return sandbox.Spec{} },
	}
	log := filepath.Join(t.TempDir(), "run.jsonl")
	run := func() (sink.Record, *report.Report) {
		rep, err := e.Run(context.Background(), eval.Config{Sandbox: local.New(&local.Options{Dir: t.TempDir()}),
			Models: newGateway(t, prov), Log: log, Quiet: true, Retries: 1, Backoff: time.Millisecond})
		require.NoError(t, err)
		recs, _ := logOf(t, log)
		rec := recs["a"]
		require.Equal(t, sink.Pass, rec.Status, rec.Error)
		require.Equal(t, 1, rec.Attempt)
		return rec, rep
	}
	rec, rep := run()
	require.Len(t, prov.Served(), turns+turns-nonceAt, "the first attempt live, the retry live from call 5")
	require.Equal(t, nonceAt, rec.CallsReplayed)
	require.Equal(t, nonceAt+1, rec.ReplayDivergedAt)
	require.NotNil(t, rep.Replay)
	require.Equal(t, report.Replay{Replayed: nonceAt, Diverged: 1, Saved: rep.Replay.Saved}, *rep.Replay)
	require.Positive(t, rep.Replay.Saved.Tokens())

	require.NoError(t, os.Truncate(log, 0))
	rec, rep = run()
	require.Len(t, prov.Served(), turns+3*(turns-nonceAt), "both attempts replayed to call 5, live from there")
	require.Equal(t, 2*nonceAt, rec.CallsReplayed, "the calls both attempts replayed")
	require.Equal(t, nonceAt+1, rec.ReplayDivergedAt)
	require.Equal(t, 2*nonceAt, rep.Replay.Replayed)

	fromLog, err := report.FromLog(log, nil)
	require.NoError(t, err)
	require.Equal(t, &report.Replay{Replayed: 2 * nonceAt, Diverged: 1}, fromLog.Replay, "the log's report: from its records")
	var buf strings.Builder
	require.NoError(t, fromLog.WriteText(&buf))
	require.Contains(t, buf.String(), "8 replayed from the call store, 0 served from the cache (-cache-from), 1 episodes diverged\n")
}

// TestEngineCacheFromAnEarlierLog: a new run (a new log) with CacheFrom
// naming an earlier one is answered from the earlier log's call store,
// request by request and epoch by epoch: the provider sees no call, the
// report counts them as cached.
func TestEngineCacheFromAnEarlierLog(t *testing.T) {
	const turns = 4
	prov := newProvider(t)
	prov.ToolArguments = `{"path":"notes.txt"}`
	e := &eval.Eval[int, harness.CommandOutput]{
		Name:    "cache",
		Dataset: dataset.Slice[int]([]dataset.Sample[int]{{ID: "a", Input: turns}}),
		Harness: harness.Command[int]{Cmd: func(ep *harness.Episode[int]) sandbox.Cmd {
			return sandbox.Cmd{Args: []string{os.Args[0]}, Env: map[string]string{agentEnv: "1", "TURNS": strconv.Itoa(ep.Sample.Input)}, Timeout: time.Minute}
		}},
		Judge: judge.Func[int, harness.CommandOutput](func(_ context.Context, _ *harness.Episode[int], out harness.CommandOutput) (judge.Verdict, error) {
			return judge.Verdict{Pass: out.ExitCode == 0, Reason: out.Stderr}, nil
		}),
		Sandbox: func(dataset.Sample[int]) sandbox.Spec { return sandbox.Spec{} },
	}
	dir := t.TempDir()
	run := func(log, cacheFrom string, epochs int) *report.Report {
		rep, err := e.Run(context.Background(), eval.Config{Sandbox: local.New(&local.Options{Dir: t.TempDir()}),
			Models: newGateway(t, prov), Log: log, CacheFrom: cacheFrom, Quiet: true, Epochs: epochs})
		require.NoError(t, err)
		require.Equal(t, epochs, rep.Passed)
		return rep
	}
	first := run(filepath.Join(dir, "first.jsonl"), "", 1)
	require.Len(t, prov.Served(), turns)
	cached := run(filepath.Join(dir, "second.jsonl"), filepath.Join(dir, "first.jsonl"), 2)
	require.Len(t, prov.Served(), 2*turns, "epoch 0 from the cache, epoch 1 (not in it) live")
	require.NotNil(t, cached.Replay)
	require.Equal(t, turns, cached.Replay.Cached)
	require.Zero(t, cached.Replay.Replayed)
	require.Equal(t, first.Usage.Tokens(), cached.Replay.Saved.Tokens())
	var buf strings.Builder
	require.NoError(t, cached.WriteText(&buf))
	require.Contains(t, buf.String(), "4 served from the cache (-cache-from)")
}
