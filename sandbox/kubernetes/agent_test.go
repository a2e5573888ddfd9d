package kubernetes_test

// The real agent behind the gateway on Kubernetes: the gateway's test
// agent (gateway/internal/testagent, the official OpenAI and Anthropic Go
// SDKs) in pods of the test cluster, network off, whose NetworkPolicy lets
// them reach the gateway alone, run by the engine (eval.Config.Models)
// against the fake provider. The same checks as the local and Docker runs
// (gateway/engine_test.go), plus a second server of the host the pods must
// not reach.

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	"github.com/proctor-evals/proctor/sandbox/kubernetes"
	"github.com/proctor-evals/proctor/sandbox/kubernetes/internal/kubetest"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/usage"
)

// agentKey is the fake provider's key: the gateway holds it, and no byte
// of it may reach a pod.
const agentKey = "sk-provider-K8S-never-in-a-pod"

// agentPrices prices the fake provider's models, cache prices included.
var agentPrices = usage.Prices{"gpt-4o-mini": {Input: 0.15, Output: 0.60, CacheRead: 0.075},
	"claude-haiku-4-5": {Input: 1, Output: 5, CacheRead: 0.1, CacheWrite: 1.25}}

// agentImageTag is the image agentImage built, once per test process
// (-count=N included): the agent's build takes ~2 GB of RAM.
var agentImageTag struct {
	sync.Mutex
	tag string
}

// agentImage builds the test agent (static) and an image of it, FROM the
// busybox image (a shell and wget for the reachability probe), with the
// agent at /bin/testagent. Nothing is pulled: the test kubelet runs the
// local image.
func agentImage(t *testing.T, c *kubetest.Cluster) string {
	t.Helper()
	agentImageTag.Lock()
	defer agentImageTag.Unlock()
	if agentImageTag.tag != "" {
		return agentImageTag.tag
	}
	base := kubetest.BusyboxImage(t)
	bin := agentbin.Build(t)
	dir := t.TempDir()
	b, err := os.ReadFile(bin)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "testagent"), b, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+base+"\nCOPY testagent /bin/testagent\n"), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const tag = "proctor-kubetest-testagent:latest"
	require.NoError(t, docker.BuildImage(ctx, c.Docker(), dir, tag))
	agentImageTag.tag = tag
	return tag
}

// agentGateway is a gateway to prov, holding its key.
func agentGateway(t *testing.T, prov *gatewaytest.Provider) *gateway.Gateway {
	t.Helper()
	gw, err := gateway.New(gateway.Options{
		OpenAI:    gateway.Upstream{BaseURL: prov.OpenAIBaseURL(), Key: agentKey},
		Anthropic: gateway.Upstream{BaseURL: prov.AnthropicBaseURL(), Key: agentKey},
		Prices:    agentPrices,
	})
	require.NoError(t, err)
	return gw
}

// fakeProvider is the fake provider, expecting the key.
func fakeProvider(t *testing.T) *gatewaytest.Provider {
	prov := gatewaytest.New()
	prov.Key = agentKey
	t.Cleanup(prov.Close)
	return prov
}

// agentEval runs each sample's command in a pod of image, judged pass
// when it exits 0, with env added to the command's environment.
func agentEval(samples []dataset.Sample[agentRun], image string, env map[string]string) *eval.Eval[agentRun, harness.CommandOutput] {
	return &eval.Eval[agentRun, harness.CommandOutput]{
		Name:    "kubernetes-agent",
		Dataset: dataset.Slice[agentRun](samples),
		Harness: harness.Command[agentRun]{Cmd: func(ep *harness.Episode[agentRun]) sandbox.Cmd {
			return sandbox.Cmd{Args: ep.Sample.Input.Args, Stdin: []byte(ep.Sample.Input.Stdin), Timeout: 2 * time.Minute, Env: env}
		}},
		Judge: judge.Func[agentRun, harness.CommandOutput](func(_ context.Context, _ *harness.Episode[agentRun], out harness.CommandOutput) (judge.Verdict, error) {
			return judge.Verdict{Pass: out.ExitCode == 0, Reason: out.Stderr}, nil
		}),
		// Files: something in the workspace for the agent's tool to list
		// and for the key search to read.
		Sandbox: func(dataset.Sample[agentRun]) sandbox.Spec {
			return sandbox.Spec{Image: image, Files: map[string][]byte{"README.md": []byte("# a repository\n"), "src/main.go": []byte("package main\n")}}
		},
	}
}

// agentLog reads a run's records, their transcripts' events and their
// commands' outputs, by sample ID.
func agentLog(t *testing.T, log string) (map[string]sink.Record, map[string][]harness.Event, map[string]harness.CommandOutput) {
	t.Helper()
	recs, events, outs := map[string]sink.Record{}, map[string][]harness.Event{}, map[string]harness.CommandOutput{}
	for r, err := range jsonl.Records(log) {
		require.NoError(t, err)
		recs[r.SampleID] = r
		tr, err := eval.ReadTranscript(r.Transcript, filepath.Dir(log))
		require.NoError(t, err)
		events[r.SampleID] = tr.Events
		var out harness.CommandOutput
		if len(r.Output) > 0 {
			require.NoError(t, json.Unmarshal(r.Output, &out), "record %s: %s", r.SampleID, r.Error)
		}
		outs[r.SampleID] = out
	}
	return recs, events, outs
}

// agentRun is a sample: the command the pod runs and its standard input.
type agentRun struct {
	Args  []string
	Stdin string
}

// probe tries each address of ADDRS at PORT with busybox wget, saying
// what it got from each, then makes one Chat Completions call through the
// gateway, exiting 3 when that fails. (Not wget -T: Debian's busybox
// 1.35 wget crashes with it; timeout bounds a connection that hangs.)
const probe = `for a in $ADDRS; do timeout 20 wget -q -O- "http://$a:$PORT/"; echo " tried $a: exit $?"; done
wget -q -O- --header "Authorization: Bearer $OPENAI_API_KEY" --header "Content-Type: application/json" \
  --post-data '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello"}]}' \
  "$OPENAI_BASE_URL/chat/completions" >/dev/null || exit 3
echo '{"calls":1}'`

// TestAgentBehindTheGateway runs the real agent in pods of the test
// cluster behind the gateway, network off with the gateway-only
// NetworkPolicy, through the engine: Chat Completions, Responses and
// Messages, streaming and not, multi-turn with tool calls. It checks that
// the records' tokens and cost are what the fake provider served, that
// the provider key's bytes are nowhere in a pod (environment, workspace,
// /proc), that the pod's token is dead once its episode ended, that a
// second server of the host is not reached from a pod though the gateway
// is, and that agents that keep calling are stopped at the episode's cap,
// mid-stream included. One agent build and one image serve both runs.
func TestAgentBehindTheGateway(t *testing.T) {
	host := hostIPv4(t)
	p, _, c := provider(t, func(o *kubernetes.Options) {
		o.NetworkPolicy, o.NetworkPolicyEnforced, o.GatewayAddress = true, true, host
	})
	require.True(t, p.Guarantees().Gateway, "the provider claims a gateway-only network")
	image := agentImage(t, c)

	t.Run("calls", func(t *testing.T) { checkAgentCalls(t, p, image, host) })
	t.Run("cap", func(t *testing.T) { checkAgentCapped(t, p, image) })
}

// checkAgentCalls runs the agent of each API, streaming and not, the key
// search and the network probe, in pods of p behind the gateway.
func checkAgentCalls(t *testing.T, p *sandbox.Provider, image, host string) {
	prov := fakeProvider(t)
	gw := agentGateway(t, prov)

	// A second server of the host, on every address: no pod may reach it.
	var accepted atomic.Int64
	second := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("proctor-second-server")) }))
	ln, err := net.Listen("tcp", ":0")
	require.NoError(t, err)
	second.Listener.Close()
	second.Listener = ln
	second.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			accepted.Add(1)
		}
	}
	second.Start()
	t.Cleanup(second.Close)
	addrs := []string{"127.0.0.1"}
	ifaddrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range ifaddrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
			addrs = append(addrs, ipn.IP.String())
		}
	}

	agent := func(args ...string) []string { return append([]string{"/bin/testagent"}, args...) }
	samples := []dataset.Sample[agentRun]{
		{ID: "chat", Input: agentRun{Args: agent("-api", "chat", "-conversations", "2")}},
		{ID: "chat-stream", Input: agentRun{Args: agent("-api", "chat", "-stream")}},
		{ID: "responses-stream", Input: agentRun{Args: agent("-api", "responses", "-stream")}},
		{ID: "messages", Input: agentRun{Args: agent("-api", "messages", "-model", "claude-haiku-4-5")}},
		{ID: "messages-stream", Input: agentRun{Args: agent("-api", "messages", "-stream", "-model", "claude-haiku-4-5")}},
		{ID: "search", Input: agentRun{Args: agent("-search", "-dump-env"), Stdin: agentKey}},
		{ID: "probe", Input: agentRun{Args: []string{"sh", "-c", probe}}},
	}
	e := agentEval(samples, image, map[string]string{"ADDRS": strings.Join(addrs, " "), "PORT": strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)})
	log := filepath.Join(t.TempDir(), "run.jsonl")
	rep, err := e.Run(context.Background(), eval.Config{Sandbox: p, Models: gw, Log: log, Quiet: true, Concurrency: 3})
	require.NoError(t, err)

	recs, events, outs := agentLog(t, log)
	require.Len(t, recs, len(samples))
	summary := func(id string) (s struct {
		Calls    int      `json:"calls"`
		Found    []string `json:"found"`
		Searched int      `json:"searched"`
		Env      []string `json:"env"`
	}) {
		lines := strings.Split(strings.TrimSpace(outs[id].Stdout), "\n")
		require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &s), "%s: stdout %q stderr %q", id, outs[id].Stdout, outs[id].Stderr)
		return s
	}

	// Every call recorded as the provider served it, and priced.
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
		require.Equal(t, summary(id).Calls, n, "%s: one model event per call the agent made", id)
		require.Equal(t, sum.InputTokens, rec.InputTokens, "%s: the record's input tokens are its calls'", id)
		require.Equal(t, sum.OutputTokens, rec.OutputTokens, "%s: the record's output tokens are its calls'", id)
		require.InDelta(t, sum.CostUSD, rec.CostUSD, 1e-12, id)
		recorded = recorded.Add(sum)
		calls += n
	}
	require.GreaterOrEqual(t, summary("chat").Calls, 4, "two conversations, each with a tool call")
	var served usage.Usage
	cost := 0.0
	for _, s := range prov.Served() {
		require.Equal(t, agentKey, s.Key, "the provider got its key from the gateway")
		served = served.Add(s.Usage)
		cost += agentPrices.Cost(s.Model, s.Usage)
	}
	require.Equal(t, served.InputTokens, recorded.InputTokens, "input tokens recorded = served")
	require.Equal(t, served.OutputTokens, recorded.OutputTokens, "output tokens recorded = served")
	require.Greater(t, cost, 0.0)
	require.InDelta(t, cost, recorded.CostUSD, 1e-12, "cost recorded = the served usage priced")
	require.InDelta(t, cost, rep.Usage.CostUSD, 1e-9, "the report's cost")

	// The key is nowhere in the pod; its token is, and is dead.
	search := summary("search")
	require.GreaterOrEqual(t, search.Searched, 3, "the search read files: the workspace, /proc's environ and cmdline")
	require.Empty(t, search.Found, "the provider key's bytes were found in the pod")
	env := map[string]string{}
	for _, kv := range search.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	token := env["OPENAI_API_KEY"]
	require.True(t, strings.HasPrefix(token, "proctor-gw-"), "the pod's key is a gateway token: %q", token)
	require.True(t, strings.HasPrefix(env["OPENAI_BASE_URL"], "http://"+host+":"), "the pod calls the gateway at the policy's address: %q", env["OPENAI_BASE_URL"])
	servedBefore := len(prov.Served())
	for _, g := range []*gateway.Gateway{gw, agentGateway(t, prov)} { // the ended episode's gateway, another run's
		rq := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
		rq.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		g.ServeHTTP(w, rq)
		require.Equal(t, http.StatusUnauthorized, w.Code, "an ended episode's token: %s", w.Body)
	}
	require.Len(t, prov.Served(), servedBefore, "a refused token reached the provider")

	// The probe's pod reached the gateway (its call passed, above) and not
	// the host's second server, at any of its addresses.
	out := outs["probe"].Stdout
	require.NotContains(t, out, "proctor-second-server", "a second server of the host reached from a pod")
	for _, a := range addrs {
		// 1: wget could not connect (no route); 143: timeout stopped it.
		// Not 139: Debian's busybox wget crashing says nothing.
		require.Regexp(t, `(?m)^ tried `+regexp.QuoteMeta(a)+`: exit (1|143)$`, out, "the probe's wget at %s: %q %q", a, out, outs["probe"].Stderr)
	}
	require.Zero(t, accepted.Load(), "connections accepted by a second server of the host")
}

// checkAgentCapped runs agents that never stop calling, under a cap per
// episode, in pods of p: streaming, with a slow stream so that the cap
// falls mid-stream, and not. Each episode ends as an error of kind limit
// with what it spent, at its cap.
func checkAgentCapped(t *testing.T, p *sandbox.Provider, image string) {
	prov := fakeProvider(t)
	prov.Chunks, prov.ChunkDelay = 40, 2*time.Millisecond
	gw := agentGateway(t, prov)
	const maxTokens = 2000
	samples := []dataset.Sample[agentRun]{
		{ID: "forever-stream", Input: agentRun{Args: []string{"/bin/testagent", "-api", "chat", "-stream", "-conversations", "0"}}},
		{ID: "forever-messages", Input: agentRun{Args: []string{"/bin/testagent", "-api", "messages", "-model", "claude-haiku-4-5", "-conversations", "0"}}},
	}
	log := filepath.Join(t.TempDir(), "run.jsonl")
	_, err := agentEval(samples, image, nil).Run(context.Background(), eval.Config{
		Sandbox: p, Models: gw, Log: log, Quiet: true, MaxEpisodeTokens: maxTokens, Concurrency: 2})
	require.NoError(t, err)
	recs, events, _ := agentLog(t, log)
	require.Len(t, recs, len(samples))
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
	for _, ev := range events["forever-stream"] {
		cut = cut || ev.Kind == "model" && strings.Contains(string(ev.Output), `"cut":"cap"`)
	}
	require.True(t, cut, "the streaming agent's last stream was cut at the cap")
}
