package gateway_test

// The gateway wired into the engine (eval.Config.Models), end to end: a
// real agent (testagent, the official SDKs) in local and Docker sandboxes
// behind the gateway, against the fake provider.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/gateway"
	"github.com/proctor-evals/proctor/gateway/gatewaytest"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/agentbin"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/docker"
	"github.com/proctor-evals/proctor/sandbox/local"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/usage"
)

// engineKey is the fake provider's key: the gateway holds it, and no
// byte of it may reach a sandbox.
const engineKey = "sk-provider-ZX81-never-in-a-sandbox"

// enginePrices prices the fake provider's model, with cache prices.
var enginePrices = usage.Prices{"gpt-4o-mini": {Input: 0.15, Output: 0.60, CacheRead: 0.075},
	"claude-haiku-4-5": {Input: 1, Output: 5, CacheRead: 0.1, CacheWrite: 1.25}}

// engineAgent returns a directory holding only the built testagent: a
// sandbox's template.
func engineAgent(t *testing.T) string {
	t.Helper()
	return filepath.Dir(agentbin.Build(t))
}

// agentTask is a sample: the testagent's arguments and standard input.
type agentTask struct {
	Args  []string
	Stdin string
}

// agentEval runs testagent with each sample's arguments in a sandbox made
// by spec, judged pass when it exits 0.
func agentEval(samples []dataset.Sample[agentTask], spec sandbox.Spec) *eval.Eval[agentTask, harness.CommandOutput] {
	return &eval.Eval[agentTask, harness.CommandOutput]{
		Name:    "gateway-engine",
		Dataset: dataset.Slice[agentTask](samples),
		Harness: harness.Command[agentTask]{Cmd: func(ep *harness.Episode[agentTask]) sandbox.Cmd {
			return sandbox.Cmd{Args: append([]string{"./testagent"}, ep.Sample.Input.Args...), Stdin: []byte(ep.Sample.Input.Stdin), Timeout: time.Minute}
		}},
		Judge: judge.Func[agentTask, harness.CommandOutput](func(_ context.Context, _ *harness.Episode[agentTask], out harness.CommandOutput) (judge.Verdict, error) {
			return judge.Verdict{Pass: out.ExitCode == 0, Reason: out.Stderr}, nil
		}),
		Sandbox: func(dataset.Sample[agentTask]) sandbox.Spec { return spec },
	}
}

func newProvider(t *testing.T) *gatewaytest.Provider {
	p := gatewaytest.New()
	p.Key = engineKey
	t.Cleanup(p.Close)
	return p
}

func newGateway(t *testing.T, p *gatewaytest.Provider) *gateway.Gateway {
	gw, err := gateway.New(gateway.Options{
		OpenAI:    gateway.Upstream{BaseURL: p.OpenAIBaseURL(), Key: engineKey},
		Anthropic: gateway.Upstream{BaseURL: p.AnthropicBaseURL(), Key: engineKey},
		Prices:    enginePrices,
	})
	require.NoError(t, err)
	return gw
}

// logOf reads a run's records, by sample ID, and their transcripts.
func logOf(t *testing.T, log string) (map[string]sink.Record, map[string][]harness.Event) {
	t.Helper()
	recs, events := map[string]sink.Record{}, map[string][]harness.Event{}
	for r, err := range jsonl.Records(log) {
		require.NoError(t, err)
		recs[r.SampleID] = r
		tr, err := eval.ReadTranscript(r.Transcript, filepath.Dir(log))
		require.NoError(t, err)
		events[r.SampleID] = tr.Events
	}
	return recs, events
}

// summary is testagent's last line.
type agentSummary struct {
	Calls    int      `json:"calls"`
	Error    string   `json:"error"`
	Found    []string `json:"found"`
	Searched int      `json:"searched"`
	Env      []string `json:"env"`
}

func summaryOf(t *testing.T, rec sink.Record) agentSummary {
	t.Helper()
	var out harness.CommandOutput
	require.NoError(t, json.Unmarshal(rec.Output, &out), "record %s: %s", rec.SampleID, rec.Error)
	lines := strings.Split(strings.TrimSpace(out.Stdout), "\n")
	var s agentSummary
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &s), "stdout %q stderr %q", out.Stdout, out.Stderr)
	return s
}

// checkAgentsBehindTheGateway runs the agents of every API, streaming and
// not, and a key search, in sandboxes of p behind the gateway, and checks
// what must hold: the calls recorded as the provider served them, priced,
// the key nowhere in the sandbox, the tokens dead once their episodes end.
func checkAgentsBehindTheGateway(t *testing.T, sp *sandbox.Provider, spec sandbox.Spec) {
	prov := newProvider(t)
	gw := newGateway(t, prov)
	samples := []dataset.Sample[agentTask]{
		{ID: "chat", Input: agentTask{[]string{"-api", "chat", "-conversations", "2"}, ""}},
		{ID: "chat-stream", Input: agentTask{[]string{"-api", "chat", "-stream"}, ""}},
		{ID: "responses-stream", Input: agentTask{[]string{"-api", "responses", "-stream"}, ""}},
		{ID: "messages", Input: agentTask{[]string{"-api", "messages", "-model", "claude-haiku-4-5"}, ""}},
		{ID: "messages-stream", Input: agentTask{[]string{"-api", "messages", "-stream", "-model", "claude-haiku-4-5"}, ""}},
		{ID: "search", Input: agentTask{[]string{"-search", "-dump-env"}, engineKey}},
	}
	log := filepath.Join(t.TempDir(), "run.jsonl")
	rep, err := agentEval(samples, spec).Run(context.Background(), eval.Config{
		Sandbox: sp, Models: gw, Log: log, Quiet: true, Concurrency: 3})
	require.NoError(t, err)
	recs, events := logOf(t, log)
	require.Len(t, recs, len(samples))

	var recorded usage.Usage
	calls := 0
	for id, rec := range recs {
		require.Equal(t, sink.Pass, rec.Status, "%s: %s %s", id, rec.Error, rec.Output)
		var sum usage.Usage
		n := 0
		for _, ev := range events[id] {
			if ev.Kind != "model" {
				continue
			}
			n++
			require.Empty(t, ev.Error, "%s: a model call failed", id)
			require.NotEmpty(t, ev.Usage.Model, "%s: a model event names its model", id)
			sum = sum.Add(ev.Usage)
		}
		require.Equal(t, summaryOf(t, rec).Calls, n, "%s: one model event per call the agent made", id)
		require.Equal(t, sum.InputTokens, rec.InputTokens, "%s: the record's input tokens are its calls'", id)
		require.Equal(t, sum.OutputTokens, rec.OutputTokens, "%s: the record's output tokens are its calls'", id)
		require.InDelta(t, sum.CostUSD, rec.CostUSD, 1e-12, id)
		recorded = recorded.Add(sum)
		calls += n
	}
	served := prov.Served()
	require.Len(t, served, calls, "every call reached the provider once")
	var want usage.Usage
	wantCost := 0.0
	for _, s := range served {
		require.Equal(t, engineKey, s.Key, "the provider got its key from the gateway")
		want = want.Add(s.Usage)
		wantCost += enginePrices.Cost(s.Model, s.Usage)
	}
	require.Equal(t, want.InputTokens, recorded.InputTokens, "input tokens recorded = served")
	require.Equal(t, want.OutputTokens, recorded.OutputTokens, "output tokens recorded = served")
	require.Greater(t, wantCost, 0.0)
	require.InDelta(t, wantCost, recorded.CostUSD, 1e-12, "cost recorded = the served usage priced")
	require.InDelta(t, wantCost, rep.Usage.CostUSD, 1e-9, "the report's cost")
	models := map[string]bool{}
	for _, m := range rep.ByModel {
		models[m.Model] = true
	}
	require.True(t, models["gpt-4o-mini"] && models["claude-haiku-4-5"], "the cost is split by model: %+v", rep.ByModel)

	// The key is nowhere in the sandbox; the token is, and is dead.
	search := summaryOf(t, recs["search"])
	require.GreaterOrEqual(t, search.Searched, 3, "the search read files: the workspace, its own environ and cmdline")
	require.Empty(t, search.Found, "the provider key's bytes were found in the sandbox")
	env := map[string]string{}
	for _, kv := range search.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	token := env["OPENAI_API_KEY"]
	require.True(t, strings.HasPrefix(token, "proctor-gw-"), "the sandbox's key is a gateway token: %q", token)
	require.Equal(t, token, env["ANTHROPIC_API_KEY"])
	require.NotEmpty(t, env["OPENAI_BASE_URL"])
	for _, g := range []*gateway.Gateway{gw, newGateway(t, prov)} { // the ended episode's gateway, another run's
		rq := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
		rq.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		g.ServeHTTP(w, rq)
		require.Equal(t, http.StatusUnauthorized, w.Code, "an ended episode's token: %s", w.Body)
	}
	require.Len(t, prov.Served(), calls, "a refused token reached the provider")
}

// checkAgentStoppedAtItsCap runs an agent that never stops calling under
// a per-episode cap, streaming with a slow stream so that the cap falls
// mid-stream: the episode ends as an error of kind limit with what it
// spent, at its cap.
func checkAgentStoppedAtItsCap(t *testing.T, sp *sandbox.Provider, spec sandbox.Spec) {
	prov := newProvider(t)
	prov.Chunks, prov.ChunkDelay = 40, 2*time.Millisecond
	gw := newGateway(t, prov)
	const maxTokens = 2000
	samples := []dataset.Sample[agentTask]{
		{ID: "forever", Input: agentTask{[]string{"-api", "chat", "-stream", "-conversations", "0"}, ""}},
		{ID: "forever-messages", Input: agentTask{[]string{"-api", "messages", "-model", "claude-haiku-4-5", "-conversations", "0"}, ""}},
	}
	log := filepath.Join(t.TempDir(), "run.jsonl")
	_, err := agentEval(samples, spec).Run(context.Background(), eval.Config{
		Sandbox: sp, Models: gw, Log: log, Quiet: true, MaxEpisodeTokens: maxTokens})
	require.NoError(t, err)
	recs, events := logOf(t, log)
	for id, rec := range recs {
		require.Equal(t, sink.Error, rec.Status, "%s: %s", id, rec.Output)
		require.Equal(t, sink.KindLimit, rec.ErrorKind, "%s: %s", id, rec.Error)
		require.Contains(t, rec.Error, "stopped at its cap")
		tokens := rec.InputTokens + rec.OutputTokens
		require.GreaterOrEqual(t, tokens, int64(maxTokens*9/10), "%s stopped well before its cap", id)
		var sum usage.Usage
		for _, ev := range events[id] {
			sum = sum.Add(ev.Usage)
		}
		require.Equal(t, sum.Tokens(), tokens, "%s: the record holds what its calls spent", id)
	}
	var cut bool
	for _, ev := range events["forever"] {
		cut = cut || ev.Kind == "model" && strings.Contains(string(ev.Output), `"cut":"cap"`)
	}
	require.True(t, cut, "the streaming agent's last stream was cut at the cap")
}

func TestAgentsBehindTheGatewayLocal(t *testing.T) {
	t.Parallel()
	spec := sandbox.Spec{Template: engineAgent(t)}
	checkAgentsBehindTheGateway(t, local.New(&local.Options{Dir: t.TempDir()}), spec)
}

func TestAgentStoppedAtItsCapLocal(t *testing.T) {
	t.Parallel()
	spec := sandbox.Spec{Template: engineAgent(t)}
	checkAgentStoppedAtItsCap(t, local.New(&local.Options{Dir: t.TempDir()}), spec)
}

const engineImage = "proctor-test-busybox:latest"

// dockerProvider returns a Docker provider whose image is busybox, or
// skips (fails, with PROCTOR_REQUIRE_DOCKER=1).
func dockerProvider(t *testing.T) *sandbox.Provider {
	t.Helper()
	skip := func(msg string) {
		if os.Getenv("PROCTOR_REQUIRE_DOCKER") == "1" {
			t.Fatal("PROCTOR_REQUIRE_DOCKER=1 but " + msg)
		}
		t.Skip(msg)
	}
	if _, err := os.Stat(docker.BusyboxPath); err != nil {
		skip("no busybox-static binary at " + docker.BusyboxPath + ": " + err.Error())
	}
	cli, err := docker.NewClient()
	if err != nil {
		skip("no Docker client: " + err.Error())
	}
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		skip("no Docker engine reachable: " + err.Error())
	}
	require.NoError(t, docker.BuildBusyboxImage(ctx, cli, engineImage, docker.BusyboxPath))
	d := docker.NewDriver(cli, nil)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		docker.Cleanup(ctx, cli, d.RunID())
	})
	p := sandbox.NewProvider(d, nil)
	require.True(t, p.Guarantees().Gateway, "the Docker driver claims a gateway-only network here (root, a local engine)")
	return p
}

func TestAgentsBehindTheGatewayDocker(t *testing.T) {
	t.Parallel()
	spec := sandbox.Spec{Image: engineImage, Template: engineAgent(t)}
	checkAgentsBehindTheGateway(t, dockerProvider(t), spec)
}

func TestAgentStoppedAtItsCapDocker(t *testing.T) {
	t.Parallel()
	spec := sandbox.Spec{Image: engineImage, Template: engineAgent(t)}
	checkAgentStoppedAtItsCap(t, dockerProvider(t), spec)
}

// shellAgent calls Chat Completions CALLS times (forever when 0) with
// busybox wget, as any HTTP client in a sandbox would, from the variables
// the gateway gives it; it exits 3 on an API error.
const shellAgent = `n=0; while [ "${CALLS:-0}" = 0 ] || [ $n -lt $CALLS ]; do
  $WGET -q -O- --header "Authorization: Bearer $OPENAI_API_KEY" --header "Content-Type: application/json" \
    --post-data '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello there, how are you"}]}' \
    "$OPENAI_BASE_URL/chat/completions" >/dev/null || exit 3
  n=$((n+1)); done; echo "{\"calls\":$n}"`

// checkShellAgents runs the shell agent behind the gateway, in sandboxes
// of sp: one that makes 2 calls (recorded as served, priced), one that
// keeps calling under a cap of 500 tokens per episode (refused at it,
// ended as limit with what it spent).
func checkShellAgents(t *testing.T, sp *sandbox.Provider, spec sandbox.Spec, wget string) {
	prov := newProvider(t)
	gw := newGateway(t, prov)
	e := &eval.Eval[string, harness.CommandOutput]{Name: "shell-agent",
		Dataset: dataset.Slice[string]{{ID: "two", Input: "2"}, {ID: "forever", Input: "0"}},
		Harness: harness.Command[string]{Cmd: func(ep *harness.Episode[string]) sandbox.Cmd {
			return sandbox.Cmd{Args: []string{"sh", "-c", shellAgent}, Env: map[string]string{"CALLS": ep.Sample.Input, "WGET": wget}, Timeout: time.Minute}
		}},
		Judge: judge.Func[string, harness.CommandOutput](func(_ context.Context, _ *harness.Episode[string], out harness.CommandOutput) (judge.Verdict, error) {
			return judge.Verdict{Pass: out.ExitCode == 0, Reason: out.Stderr}, nil
		}),
		Sandbox: func(dataset.Sample[string]) sandbox.Spec { return spec },
	}
	const maxTokens = 500
	log := filepath.Join(t.TempDir(), "run.jsonl")
	_, err := e.Run(context.Background(), eval.Config{Sandbox: sp, Models: gw, Log: log, Quiet: true, MaxEpisodeTokens: maxTokens})
	require.NoError(t, err)
	recs, events := logOf(t, log)
	two := recs["two"]
	require.Equal(t, sink.Pass, two.Status, "%s %s", two.Error, two.Output)
	require.Len(t, events["two"], 3, "two model events and the command's")
	forever := recs["forever"]
	require.Equal(t, sink.Error, forever.Status)
	require.Equal(t, sink.KindLimit, forever.ErrorKind, forever.Error)
	require.Greater(t, forever.InputTokens+forever.OutputTokens, int64(maxTokens*8/10), "stopped well before its cap")
	// Stopped by the gateway (its next call refused, 429) or by the
	// watchdog once over the cap, whichever came first.
	var last harness.Event
	forwarded := 0
	for _, ev := range append(events["two"], events["forever"]...) {
		if ev.Kind == "model" {
			last = ev
			if strings.Contains(string(ev.Output), `"status":200`) {
				forwarded++
			}
		}
	}
	refused := strings.Contains(string(last.Output), `"status":429`)
	require.True(t, refused || forever.InputTokens+forever.OutputTokens > maxTokens, "neither refused at its cap nor over it: %s", last.Output)
	var served usage.Usage
	cost := 0.0
	for _, s := range prov.Served() {
		require.Equal(t, engineKey, s.Key)
		served = served.Add(s.Usage)
		cost += enginePrices.Cost(s.Model, s.Usage)
	}
	require.Len(t, prov.Served(), forwarded, "every call recorded as answered reached the provider, once")
	require.Equal(t, served.InputTokens, two.InputTokens+forever.InputTokens, "input tokens recorded = served")
	require.Equal(t, served.OutputTokens, two.OutputTokens+forever.OutputTokens, "output tokens recorded = served")
	require.InDelta(t, cost, two.CostUSD+forever.CostUSD, 1e-12, "cost recorded = the served usage priced")
}

// needBusybox skips t (fails it under PROCTOR_REQUIRE_TOOLS=1) without
// the static busybox the local sandbox's shell agents run.
func needBusybox(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(docker.BusyboxPath); err != nil {
		if os.Getenv("PROCTOR_REQUIRE_TOOLS") == "1" {
			t.Fatal(err)
		}
		t.Skipf("no busybox at %s (set PROCTOR_REQUIRE_TOOLS=1 to fail instead): %v", docker.BusyboxPath, err)
	}
}

func TestShellAgentBehindTheGatewayLocal(t *testing.T) {
	t.Parallel()
	needBusybox(t)
	checkShellAgents(t, local.New(&local.Options{Dir: t.TempDir()}), sandbox.Spec{}, docker.BusyboxPath+" wget")
}

func TestShellAgentBehindTheGatewayDocker(t *testing.T) {
	t.Parallel()
	checkShellAgents(t, dockerProvider(t), sandbox.Spec{Image: engineImage}, "wget")
}

// TestProjectionSeesACLIAgentsCalls: the run's projected cost, as its
// progress shows it, is made of what a CLI agent's calls through the
// gateway cost (the harness itself reports no usage): known once ten
// episodes have a cost, and holding the run's total.
func TestProjectionSeesACLIAgentsCalls(t *testing.T) {
	t.Parallel()
	needBusybox(t)
	prov := newProvider(t)
	gw := newGateway(t, prov)
	const n = 24
	samples := make(dataset.Slice[string], n)
	for i := range samples {
		samples[i] = dataset.Sample[string]{ID: fmt.Sprintf("s%02d", i), Input: "1"}
	}
	e := &eval.Eval[string, harness.CommandOutput]{Name: "projection",
		Dataset: samples,
		Harness: harness.Command[string]{Cmd: func(ep *harness.Episode[string]) sandbox.Cmd {
			return sandbox.Cmd{Args: []string{"sh", "-c", shellAgent}, Env: map[string]string{"CALLS": ep.Sample.Input, "WGET": docker.BusyboxPath + " wget"}, Timeout: time.Minute}
		}},
		Judge: judge.Func[string, harness.CommandOutput](func(_ context.Context, _ *harness.Episode[string], out harness.CommandOutput) (judge.Verdict, error) {
			return judge.Verdict{Pass: out.ExitCode == 0, Reason: out.Stderr}, nil
		}),
	}
	var seen []eval.Progress
	rep, err := e.Run(context.Background(), eval.Config{Sandbox: local.New(&local.Options{Dir: t.TempDir()}), Models: gw, Quiet: true, Concurrency: 1,
		ProgressEvery: time.Millisecond, OnProgress: func(p eval.Progress) { seen = append(seen, p) }})
	require.NoError(t, err)
	require.Equal(t, n, rep.Passed, "every agent made its call")
	total := 0.0
	for _, s := range prov.Served() {
		total += enginePrices.Cost(s.Model, s.Usage)
	}
	require.Len(t, prov.Served(), n)
	require.Positive(t, total)
	projected := 0
	for _, p := range seen {
		if p.Final || p.Done == p.Total {
			continue
		}
		// The episodes the projection is made from: the snapshot's counts
		// (Done is read apart from them, and may be one ahead).
		recorded := p.Pass + p.Fail + p.Error + p.Unscored
		if recorded < 10 {
			require.False(t, p.ProjectedCostUSD.Known(), "projected from %d episodes", recorded)
			continue
		}
		projected++
		require.True(t, p.ProjectedCostUSD.Known(), "not projected after %d episodes", recorded)
		require.Positive(t, p.CostUSD, "the agents' calls are the run's cost so far")
		require.LessOrEqual(t, p.ProjectedCostUSD.Low, total+1e-12, "%d done: %v", p.Done, p.ProjectedCostUSD)
		require.GreaterOrEqual(t, p.ProjectedCostUSD.High, total-1e-12, "%d done: %v", p.Done, p.ProjectedCostUSD)
	}
	require.Positive(t, projected, "no snapshot between 10 episodes done and the end")
	require.InDelta(t, total, seen[len(seen)-1].CostUSD, 1e-12, "the last snapshot's cost is the served calls priced")
}
