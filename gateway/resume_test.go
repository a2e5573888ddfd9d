package gateway_test

// The crash tests: a process holding a gateway with a call store and a
// deterministic agent (this test binary, run again as a child: see
// TestMain) is killed with SIGKILL at a random call, and the episode is
// run again by a new process on the same store.

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/gateway"
	"github.com/proctor-evals/proctor/gateway/gatewaytest"
	"github.com/proctor-evals/proctor/usage"
)

// The child's settings, from its environment.
const (
	childEnv  = "PROCTOR_GATEWAY_RESUME_CHILD" // the store's path
	agentEnv  = "PROCTOR_GATEWAY_REPLAY_AGENT" // set: be the agent alone
	engineEnv = "PROCTOR_GATEWAY_ENGINE_CHILD" // the log's path: run the engine (preempt_test.go)
)

// childResult is what a child prints: the calls its meter recorded and
// the digest of its workspace.
type childResult struct {
	Calls     []gateway.Call
	Workspace string
}

// TestMain runs the child when the test binary is started as one.
func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		os.Exit(runChild(path))
	}
	if os.Getenv(agentEnv) != "" { // the agent, in a sandbox behind the engine's gateway
		turns, _ := strconv.Atoi(os.Getenv("TURNS"))
		nonceAt := -1
		if v := os.Getenv("NONCE_AT"); v != "" {
			nonceAt, _ = strconv.Atoi(v)
		}
		if err := agentEpisode(os.Getenv("OPENAI_BASE_URL"), os.Getenv("OPENAI_API_KEY"), ".", turns, nonceAt); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		fmt.Println(workspaceDigest("."))
		os.Exit(0)
	}
	if log := os.Getenv(engineEnv); log != "" { // after the agent's: its sandbox may pass the variable on
		os.Exit(runEngineChild(log))
	}
	os.Exit(m.Run())
}

// runChild opens a gateway on the store at path, to the provider at
// PROVIDER, and runs the deterministic agent's episode through it in the
// workspace WORKSPACE: TURNS model calls. NONCE_AT, when set, is the call
// whose request carries a random nonce (a nondeterministic agent).
func runChild(path string) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "child:", err); return 2 }
	g, err := gateway.New(gateway.Options{OpenAI: gateway.Upstream{BaseURL: os.Getenv("PROVIDER") + "/v1", Key: providerKey}})
	if err != nil {
		return fail(err)
	}
	if _, _, closeStore, err := g.OpenStore(path); err != nil {
		return fail(err)
	} else {
		defer closeStore()
	}
	s := httptest.NewServer(g)
	defer s.Close()
	m := &keyedMeter{sample: "s1"}
	token, end := g.Open(m)
	turns, _ := strconv.Atoi(os.Getenv("TURNS"))
	nonceAt := -1
	if v := os.Getenv("NONCE_AT"); v != "" {
		nonceAt, _ = strconv.Atoi(v)
	}
	ws := os.Getenv("WORKSPACE")
	if err := agentEpisode(s.URL+"/v1", token, ws, turns, nonceAt); err != nil {
		return fail(err)
	}
	end()
	out := childResult{Calls: m.Calls(), Workspace: workspaceDigest(ws)}
	json.NewEncoder(os.Stdout).Encode(out)
	return 0
}

// agentEpisode is the deterministic agent: a Chat Completions loop of
// turns calls with a write_file tool that appends to a file in ws; every
// third call is not streamed. After a text answer it asks to go on.
func agentEpisode(baseURL, token, ws string, turns, nonceAt int) error {
	type msg = map[string]any
	messages := []msg{{"role": "user", "content": "append to notes.txt, turn by turn"}}
	tools := []msg{{"type": "function", "function": msg{"name": "write_file", "parameters": msg{"type": "object"}}}}
	for turn := range turns {
		if turn == nonceAt {
			n, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
			messages = append(messages, msg{"role": "user", "content": "nonce " + n.String()})
		}
		stream := turn%3 != 2
		body, _ := json.Marshal(msg{"model": "gpt-4o-mini", "messages": messages, "tools": tools, "stream": stream})
		req, _ := http.NewRequest("POST", baseURL+"/chat/completions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			return fmt.Errorf("turn %d: %v %d %s", turn, err, resp.StatusCode, b)
		}
		text, callID, args := chatAnswer(b, stream)
		if callID == "" {
			messages = append(messages, msg{"role": "assistant", "content": text}, msg{"role": "user", "content": "go on"})
			continue
		}
		f, err := os.OpenFile(filepath.Join(ws, "notes.txt"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		fmt.Fprintf(f, "turn %d: %s\n", turn, args)
		f.Close()
		messages = append(messages,
			msg{"role": "assistant", "content": nil, "tool_calls": []msg{{"id": callID, "type": "function", "function": msg{"name": "write_file", "arguments": args}}}},
			msg{"role": "tool", "tool_call_id": callID, "content": "written"})
	}
	return nil
}

// chatAnswer reads a Chat Completions answer, streamed or not: its text,
// or its tool call's ID and arguments.
func chatAnswer(b []byte, stream bool) (text, callID, args string) {
	type call struct {
		ID       string `json:"id"`
		Function struct {
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	type choice struct {
		Message, Delta struct {
			Content   string `json:"content"`
			ToolCalls []call `json:"tool_calls"`
		}
	}
	var chunks [][]byte
	if !stream {
		chunks = [][]byte{b}
	}
	for _, l := range strings.Split(string(b), "\n") {
		if d, ok := strings.CutPrefix(l, "data: "); ok && stream && d != "[DONE]" {
			chunks = append(chunks, []byte(d))
		}
	}
	for _, c := range chunks {
		var v struct{ Choices []choice }
		json.Unmarshal(c, &v)
		for _, ch := range v.Choices {
			for _, m := range []struct {
				Content   string `json:"content"`
				ToolCalls []call `json:"tool_calls"`
			}{ch.Message, ch.Delta} {
				text += m.Content
				for _, tc := range m.ToolCalls {
					callID += tc.ID
					args += tc.Function.Arguments
				}
			}
		}
	}
	return text, callID, args
}

func workspaceDigest(ws string) string {
	b, _ := os.ReadFile(filepath.Join(ws, "notes.txt"))
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// killer is a fake provider that SIGKILLs the child when the provider is
// at call killAt: on its arrival (then the call is never answered) or
// after the first bytes of its answer.
type killer struct {
	p         *gatewaytest.Provider
	srv       *httptest.Server
	calls     atomic.Int64
	mu        sync.Mutex
	pid       int // the child to kill; 0: none
	killAt    int64
	midStream bool
	signal    syscall.Signal // when set, sent at killAt's arrival instead of SIGKILL (not with midStream)
}

func newKiller(t *testing.T) *killer {
	k := &killer{p: gatewaytest.New(), killAt: -1}
	t.Cleanup(k.p.Close)
	k.p.Key = providerKey
	k.p.ToolArguments = `{"path":"notes.txt"}`
	k.p.Usage = func(gatewaytest.Request) usage.Usage { return usage.Usage{InputTokens: 1000, OutputTokens: 50} }
	k.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := k.calls.Add(1) - 1
		k.mu.Lock()
		kill := n == k.killAt && k.pid != 0
		pid, mid, sig := k.pid, k.midStream, k.signal
		k.mu.Unlock()
		if sig == 0 {
			sig = syscall.SIGKILL
		}
		if kill && !mid {
			// A signal is delivered asynchronously: answering now could let
			// the child store this call (or, stopped by SIGTERM, even finish
			// its episode) before the signal takes effect. It is never
			// answered: its connection closes with the child or with the
			// episode the child cancels (which the server sees once the
			// body is read).
			syscall.Kill(pid, sig)
			io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-time.After(time.Minute):
				t.Errorf("the child signalled (%v) at call %d kept its connection open", sig, n)
			}
			return
		}
		if kill && mid {
			w = &killWriter{ResponseWriter: w, pid: pid}
		}
		k.p.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(k.srv.Close)
	return k
}

// killWriter kills the child once the answer's first bytes are written.
type killWriter struct {
	http.ResponseWriter
	pid    int
	killed bool
}

func (w *killWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	if !w.killed {
		w.killed = true
		syscall.Kill(w.pid, syscall.SIGKILL)
	}
	return n, err
}

func (w *killWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// child runs the child on the store at store; killed reports that it was
// killed (SIGKILL), else its result.
func (k *killer) child(t *testing.T, store string, turns, nonceAt int, killAt int64, mid bool) (res childResult, killed bool) {
	t.Helper()
	ws := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+store, "PROVIDER="+k.srv.URL, "WORKSPACE="+ws,
		"TURNS="+strconv.Itoa(turns), "NONCE_AT="+strconv.Itoa(nonceAt))
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	k.mu.Lock()
	k.killAt, k.midStream = -1, mid
	require.NoError(t, cmd.Start())
	k.pid = cmd.Process.Pid
	if killAt >= 0 {
		k.killAt = k.calls.Load() + killAt
	}
	k.mu.Unlock()
	err := cmd.Wait()
	k.mu.Lock()
	k.pid = 0
	k.mu.Unlock()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL {
		return res, true
	}
	require.NoError(t, err, stderr.String())
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	return res, false
}

// tally is what a run's calls cost: the provider's tokens bought live
// and those replayed (Saved), and how many of each.
func tally(calls []gateway.Call) (live, replayed int, liveTokens, savedTokens int64) {
	for _, c := range calls {
		if c.Replay == gateway.ReplayReplayed {
			replayed++
			savedTokens += c.Saved.Tokens()
			continue
		}
		live++
		liveTokens += c.Usage.Tokens()
	}
	return
}

// TestSIGKILLAtARandomCallResumesByReplay: the deterministic agent (12
// calls: tool calls, text, streamed and not) is SIGKILLed at a random
// call, on its arrival at the provider or mid-answer, 25 times; each time
// the episode run again on the same store replays the calls stored and
// goes live from there: the provider's calls of both runs total at most
// one more than an uninterrupted run's, the final workspace is the
// uninterrupted run's, and the resumed run counts each call's tokens
// once, live or replayed.
func TestSIGKILLAtARandomCallResumesByReplay(t *testing.T) {
	const turns, kills = 12, 25
	k := newKiller(t)
	dir := t.TempDir()
	base, killed := k.child(t, filepath.Join(dir, "base.calls.jsonl"), turns, -1, -1, false)
	require.False(t, killed)
	require.Len(t, base.Calls, turns)
	baseLive, _, baseTokens, _ := tally(base.Calls)
	require.Equal(t, turns, baseLive)
	seed := mrand.Uint64()
	t.Logf("seed %d", seed)
	rnd := mrand.New(mrand.NewPCG(seed, 0))
	for i := range kills {
		store := filepath.Join(dir, fmt.Sprintf("run%d.calls.jsonl", i))
		at, mid := rnd.Int64N(turns), rnd.IntN(2) == 1
		before := k.calls.Load()
		_, killed := k.child(t, store, turns, -1, at, mid)
		require.True(t, killed, "kill %d at call %d (mid-answer %v)", i, at, mid)
		resumed, killed := k.child(t, store, turns, -1, -1, false)
		require.False(t, killed)
		bought := k.calls.Load() - before
		require.LessOrEqual(t, bought, int64(turns+1), "kill %d at call %d (mid-answer %v): provider calls", i, at, mid)
		require.Equal(t, base.Workspace, resumed.Workspace, "kill %d at call %d", i, at)
		live, replayed, liveTokens, savedTokens := tally(resumed.Calls)
		require.Equal(t, turns, live+replayed)
		// Killed mid-answer, the call may be stored already: the gateway
		// stores an answer whole before its last bytes reach the agent.
		if !mid || replayed != int(at)+1 {
			require.Equal(t, int(at), replayed, "kill %d at call %d (mid-answer %v): the calls answered before it are replayed", i, at, mid)
		}
		require.Equal(t, baseTokens, liveTokens+savedTokens, "each call's tokens counted once")
	}
}

// TestANondeterministicAgentDivergesWhereItsRequestChanged: an agent whose
// call 5 carries a random nonce is replayed up to it and goes live there,
// the call recorded as where it diverged; the recording is then the new
// run's, so a third run replays it up to the nonce again.
func TestANondeterministicAgentDivergesWhereItsRequestChanged(t *testing.T) {
	const turns, at = 9, 5
	k := newKiller(t)
	store := filepath.Join(t.TempDir(), "run.calls.jsonl")
	first, _ := k.child(t, store, turns, at, -1, false)
	for range 2 {
		before := k.calls.Load()
		again, _ := k.child(t, store, turns, at, -1, false)
		require.Equal(t, int64(turns-at), k.calls.Load()-before)
		live, replayed, _, _ := tally(again.Calls)
		require.Equal(t, at, replayed)
		require.Equal(t, turns-at, live)
		for i, c := range again.Calls {
			want := map[bool]string{true: gateway.ReplayReplayed, false: ""}[i < at]
			if i == at {
				want = gateway.ReplayDiverged
			}
			require.Equal(t, want, c.Replay, "call %d", i)
		}
		require.Equal(t, first.Workspace, again.Workspace)
	}
}

// BenchmarkResumeAtCall90: a 100-call episode of the deterministic agent,
// against a provider answering each call in 20 ms, run again after it
// was interrupted at call 90: resumed by replay (90 calls from the store,
// 10 live) beside run again live (100 calls), each op one episode.
func BenchmarkResumeAtCall90(b *testing.B) {
	const latency = 20 * time.Millisecond
	p := gatewaytest.New()
	defer p.Close()
	p.Key = providerKey
	p.ToolArguments = `{"path":"notes.txt"}`
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(latency)
		p.Config.Handler.ServeHTTP(w, r)
	}))
	defer slow.Close()
	dir := b.TempDir()
	episode := func(store string, turns int) {
		g, err := gateway.New(gateway.Options{OpenAI: gateway.Upstream{BaseURL: slow.URL + "/v1", Key: providerKey}})
		if err != nil {
			b.Fatal(err)
		}
		_, _, closeStore, err := g.OpenStore(store)
		if err != nil {
			b.Fatal(err)
		}
		s := httptest.NewServer(g)
		token, end := g.Open(&keyedMeter{sample: "s1"})
		ws, _ := os.MkdirTemp(dir, "ws")
		if err := agentEpisode(s.URL+"/v1", token, ws, turns, -1); err != nil {
			b.Fatal(err)
		}
		end()
		s.Close()
		if err := closeStore(); err != nil {
			b.Fatal(err)
		}
	}
	interrupted := filepath.Join(dir, "interrupted.calls.jsonl")
	episode(interrupted, 90) // the first 90 calls, stored: what the crash left
	recorded, err := os.ReadFile(interrupted)
	if err != nil {
		b.Fatal(err)
	}
	for _, replay := range []bool{true, false} {
		b.Run(map[bool]string{true: "resume-by-replay", false: "again-live"}[replay], func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				store := filepath.Join(dir, fmt.Sprintf("%v%d.calls.jsonl", replay, i))
				if replay {
					if err := os.WriteFile(store, recorded, 0o644); err != nil {
						b.Fatal(err)
					}
				}
				episode(store, 100)
			}
		})
	}
}
