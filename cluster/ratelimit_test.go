package cluster

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/gateway"
	"github.com/proctor-evals/proctor/gateway/gatewaytest"
	"github.com/proctor-evals/proctor/view"
)

// fleetLoad is four workers' gateways (shared through a real JetStream
// bucket, or each alone) calling one model with one key of a provider
// with a fixed rate limit, in real time.
type fleetLoad struct {
	workers, agents  int
	limit            gatewaytest.RateLimit
	latency          time.Duration
	warmup, measured time.Duration
	shared           bool
	// calls, when set, stops the load after so many calls instead, and
	// measures its second half (a benchmark's b.N).
	calls int64
}

type fleetOutcome struct {
	perSecond, limitedShare float64
	served, limited         int
	agent429                int64
}

func (l fleetLoad) run(t testing.TB) fleetOutcome {
	var kv jetstream.KeyValue
	if l.shared {
		srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true})
		require.NoError(t, err)
		srv.Start()
		defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
		require.True(t, srv.ReadyForConnections(10*time.Second), "the NATS server did not start")
		nc, err := nats.Connect(srv.ClientURL())
		require.NoError(t, err)
		defer nc.Close()
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		kv, err = js.CreateOrUpdateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: namesFor("r").rates, TTL: ratesTTL, Storage: jetstream.MemoryStorage})
		require.NoError(t, err)
	}
	p := gatewaytest.New()
	defer p.Close()
	p.RateLimit, p.Latency = &l.limit, l.latency
	stop := time.Now().Add(l.warmup + l.measured)
	var o fleetOutcome
	var taken atomic.Int64
	half := make(chan struct{})
	more := func() bool {
		if l.calls == 0 {
			return time.Now().Before(stop)
		}
		n := taken.Add(1)
		if n == max(l.calls/2, 1) {
			close(half)
		}
		return n <= l.calls
	}
	var wg sync.WaitGroup
	for range l.workers {
		g, err := gateway.New(gateway.Options{OpenAI: gateway.Upstream{BaseURL: p.OpenAIBaseURL(), Key: "sk-x"}})
		require.NoError(t, err)
		if l.shared {
			g.ShareLimits(kvUpdate(kv))
		}
		srv := httptest.NewServer(g)
		defer srv.Close()
		token, end := g.Open(nopMeter{})
		defer end()
		for range l.agents {
			wg.Go(func() {
				for more() {
					req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions",
						strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
					req.Header.Set("Authorization", "Bearer "+token)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						continue
					}
					resp.Body.Close()
					if resp.StatusCode == http.StatusTooManyRequests {
						atomic.AddInt64(&o.agent429, 1)
						time.Sleep(time.Second)
					}
				}
			})
		}
	}
	if l.calls > 0 {
		<-half
	} else {
		time.Sleep(l.warmup)
	}
	served0, limited0, from := len(p.Served()), p.Limited(), time.Now()
	if l.calls > 0 {
		wg.Wait()
	} else {
		time.Sleep(l.measured)
	}
	o.served, o.limited = len(p.Served())-served0, p.Limited()-limited0
	measured := time.Since(from)
	wg.Wait()
	o.perSecond = float64(o.served) / measured.Seconds()
	o.limitedShare = float64(o.limited) / float64(max(o.served+o.limited, 1))
	return o
}

type nopMeter struct{}

func (nopMeter) Remaining() gateway.Budget { return gateway.Budget{} }
func (nopMeter) Record(gateway.Call)       {}

// Four workers on one key hold one limit through the run's JetStream:
// together they stay within it and are rarely answered 429, where four
// gateways each governing alone take the limit four times over and meet
// it by 429s.
func TestFourWorkersShareOneRateLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 2 × 12 s of real time")
	}
	l := fleetLoad{workers: 4, agents: 8, limit: gatewaytest.RateLimit{PerSecond: 20, Burst: 20},
		latency: 100 * time.Millisecond, warmup: 4 * time.Second, measured: 8 * time.Second}
	alone := l.run(t)
	l.shared = true
	shared := l.run(t)
	t.Logf("alone:  %.1f/s of 20, %.1f%% answered 429 (%d served, %d limited), %d 429s to agents", alone.perSecond, 100*alone.limitedShare, alone.served, alone.limited, alone.agent429)
	t.Logf("shared: %.1f/s of 20, %.1f%% answered 429 (%d served, %d limited), %d 429s to agents", shared.perSecond, 100*shared.limitedShare, shared.served, shared.limited, shared.agent429)
	require.LessOrEqual(t, shared.limitedShare, 0.05, "share answered 429, shared")
	require.GreaterOrEqual(t, shared.perSecond, 16.0, "throughput, shared")
	require.Greater(t, alone.limitedShare, 2*shared.limitedShare, "alone, the workers each believe they own the key")
}

// BenchmarkRateGovernor runs one process, four workers each governing
// alone, and four sharing through JetStream, side by side, against the
// token-bucket provider at 50 requests a second (burst 50, 100 ms an
// answer), 8 agents a gateway: b.N calls in all, the second half
// measured (served/s, and the share answered 429).
func BenchmarkRateGovernor(b *testing.B) {
	limit := gatewaytest.RateLimit{PerSecond: 50, Burst: 50}
	for _, c := range []struct {
		name    string
		workers int
		shared  bool
	}{{"one-process", 1, false}, {"four-alone", 4, false}, {"four-shared", 4, true}} {
		b.Run(c.name, func(b *testing.B) {
			o := fleetLoad{workers: c.workers, agents: 8, limit: limit, latency: 100 * time.Millisecond,
				shared: c.shared, calls: int64(b.N)}.run(b)
			b.ReportMetric(o.perSecond, "served/s")
			b.ReportMetric(100*o.limitedShare, "%429")
			b.ReportMetric(float64(o.agent429), "429s-to-agents")
		})
	}
}

// The coordinator's viewer shows the fleet's governor: the lanes the live
// workers put in their liveness, summed by provider and model (each
// worker's limit is its share of the fleet's), a worker that left not
// counted.
func TestFleetGovernorSumsTheWorkersLanes(t *testing.T) {
	statuses := []workerStatus{
		{ID: "a:1", Lanes: []laneStatus{{"openai", "gpt-4o-mini", 5, 5, 3}, {"anthropic", "claude-haiku-4-5", 8, 2, 0}}},
		{ID: "b:2", Lanes: []laneStatus{{"openai", "gpt-4o-mini", 5, 4, 0}}},
		{ID: "c:3", Left: true, Lanes: []laneStatus{{"openai", "gpt-4o-mini", 9, 9, 9}}},
	}
	var ws []WorkerProgress
	for _, s := range statuses {
		b, err := json.Marshal(s) // as a worker puts it, and the coordinator reads it
		require.NoError(t, err)
		var got workerStatus
		require.NoError(t, json.Unmarshal(b, &got))
		ws = append(ws, WorkerProgress{ID: got.ID, Left: got.Left, lanes: got.Lanes})
	}
	require.Equal(t, []view.GovernorLane{
		{Provider: "anthropic", Model: "claude-haiku-4-5", Limit: 8, InFlight: 2},
		{Provider: "openai", Model: "gpt-4o-mini", Limit: 10, InFlight: 9, Waiting: 3},
	}, fleetGovernor(ws))
}
