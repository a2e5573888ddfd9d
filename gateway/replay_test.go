package gateway_test

import (
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/gateway"
	"github.com/proctor-evals/proctor/gateway/gatewaytest"
	"github.com/proctor-evals/proctor/internal/agentbin"
	"github.com/proctor-evals/proctor/usage"
)

// keyedMeter is a meter whose episode the call store keeps.
type keyedMeter struct {
	meter
	variant, sample string
	epoch           int
}

func (m *keyedMeter) CallKey() (string, string, int) { return m.variant, m.sample, m.epoch }

// gatewayTo is a new gateway, served, to p (a new process's).
func gatewayTo(t *testing.T, p *gatewaytest.Provider) (*gateway.Gateway, *httptest.Server) {
	g, err := gateway.New(gateway.Options{
		OpenAI:    gateway.Upstream{BaseURL: p.OpenAIBaseURL(), Key: providerKey},
		Anthropic: gateway.Upstream{BaseURL: p.AnthropicBaseURL(), Key: providerKey},
	})
	require.NoError(t, err)
	s := httptest.NewServer(g)
	t.Cleanup(s.Close)
	return g, s
}

// TestARealAgentIsReplayedFromTheStore: the SDK agent, on each API,
// streaming and not, runs an episode through a gateway with a call store;
// the same episode run again through a new gateway on the same store (a
// resume in a new process) is answered wholly from the store: the provider
// sees no call, the agent holds the same conversations, each call is
// recorded as replayed at no cost with what it cost when bought.
func TestARealAgentIsReplayedFromTheStore(t *testing.T) {
	t.Parallel()
	bin := agentbin.Build(t)
	p, _, _ := setup(t)
	p.ToolArguments = `{"path":"."}`
	path := filepath.Join(t.TempDir(), "run.calls.jsonl")
	run := func(sample string, args []string) (agentRun, []gateway.Call) {
		g, s := gatewayTo(t, p)
		_, _, closeStore, err := g.OpenStore(path)
		require.NoError(t, err)
		m := &keyedMeter{sample: sample}
		token, end := g.Open(m)
		r := runAgent(t, bin, gateway.Env(s.URL, token), args...)
		end()
		require.NoError(t, closeStore())
		// In the order the agent made them (it makes one at a time): a
		// call's record may come after the next call's, whose answer the
		// agent can have before the gateway has recorded the one before.
		calls := m.Calls()
		slices.SortStableFunc(calls, func(a, b gateway.Call) int { return a.Start.Compare(b.Start) })
		return r, calls
	}
	for _, a := range agentAPIs {
		for _, stream := range []bool{false, true} {
			args := []string{"-api", a.flag, "-model", a.model, "-conversations", "2"}
			if stream {
				args = append(args, "-stream")
			}
			sample := a.api + map[bool]string{false: "", true: "-stream"}[stream]
			before := len(p.Served())
			first, bought := run(sample, args)
			require.Zero(t, first.ExitCode, first.Summary.Error)
			require.Len(t, p.Served(), before+4)
			again, replayed := run(sample, args)
			require.Len(t, p.Served(), before+4, "%s: a replayed call reached the provider", sample)
			require.Empty(t, cmp.Diff(first, again), sample)
			require.Len(t, replayed, 4)
			for i, c := range replayed {
				require.Equal(t, gateway.ReplayReplayed, c.Replay, "%s call %d", sample, i)
				require.Equal(t, usage.Usage{Model: bought[i].Model}, c.Usage)
				require.Equal(t, bought[i].Usage, c.Saved)
				require.Equal(t, stream, c.Stream)
				require.Equal(t, bought[i].ResponseSHA256, c.ResponseSHA256, "the answer replayed byte for byte")
			}
		}
	}
}

// TestVariantsOfAnEpisodeAreStoredApart: two variants' episodes of one
// sample and epoch are two episodes of the store. Before the key had the
// variant, variant b's episode was answered with variant a's recording.
func TestVariantsOfAnEpisodeAreStoredApart(t *testing.T) {
	t.Parallel()
	bin := agentbin.Build(t)
	p, _, _ := setup(t)
	p.ToolArguments = `{"path":"."}`
	path := filepath.Join(t.TempDir(), "run.calls.jsonl")
	args := []string{"-api", agentAPIs[0].flag, "-model", agentAPIs[0].model, "-conversations", "1"}
	run := func(variant string) []gateway.Call {
		g, s := gatewayTo(t, p)
		_, _, closeStore, err := g.OpenStore(path)
		require.NoError(t, err)
		m := &keyedMeter{variant: variant, sample: "task-1"}
		token, end := g.Open(m)
		r := runAgent(t, bin, gateway.Env(s.URL, token), args...)
		end()
		require.NoError(t, closeStore())
		require.Zero(t, r.ExitCode, r.Summary.Error)
		return m.Calls()
	}
	served := len(p.Served())
	a := run("a")
	require.Equal(t, served+len(a), len(p.Served()))
	b := run("b")
	require.Equal(t, served+len(a)+len(b), len(p.Served()), "variant b's calls were answered from variant a's recording")
	for _, c := range b {
		require.Empty(t, c.Replay)
	}
	again := run("a")
	require.Equal(t, served+len(a)+len(b), len(p.Served()), "variant a's episode again is replayed")
	for _, c := range again {
		require.Equal(t, gateway.ReplayReplayed, c.Replay)
	}
}
