package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proctor-evals/proctor/gateway"
)

const benchAnswer = `{"id":"chatcmpl-1","object":"chat.completion","created":1741569952,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":20,"completion_tokens":2,"total_tokens":22,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`

const benchRequest = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say ok."}]}`

// benchTargets are the two ways to reach one provider, side by side:
// direct, and through a gateway (with a token budget, so that the request
// is parsed, clamped and rewritten: the gateway's slow path).
func benchTargets(b *testing.B, h http.HandlerFunc) (direct, viaGateway, token string) {
	up := httptest.NewServer(h)
	b.Cleanup(up.Close)
	g, err := gateway.New(gateway.Options{OpenAI: gateway.Upstream{BaseURL: up.URL + "/v1", Key: "sk-x"}})
	if err != nil {
		b.Fatal(err)
	}
	s := httptest.NewServer(g)
	b.Cleanup(s.Close)
	token, end := g.Open(&budgetMeter{left: 1 << 62})
	b.Cleanup(end)
	return up.URL, s.URL, token
}

var benchClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 512}}

// call makes one request and returns its latency to the last byte (or to
// the first byte with first).
func call(b *testing.B, url, token string, first bool) time.Duration {
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(benchRequest))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := benchClient.Do(req)
	if err != nil {
		b.Error(err)
		return 0
	}
	defer resp.Body.Close()
	if first {
		var one [1]byte
		if _, err := io.ReadFull(resp.Body, one[:]); err != nil {
			b.Error(err)
		}
		d := time.Since(start)
		io.Copy(io.Discard, resp.Body)
		return d
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		b.Error(err)
	}
	return time.Since(start)
}

// paced makes b.N calls at rate per second, each in its own goroutine,
// and reports the latencies' p50 and p99.
func paced(b *testing.B, rate int, do func() time.Duration) {
	lat := make([]time.Duration, b.N)
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	b.ResetTimer()
	for i := range b.N {
		<-tick.C
		wg.Go(func() { lat[i] = do() })
	}
	wg.Wait()
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkCallAt1000PerSecond: one non-streamed Chat Completions call,
// direct and through the gateway, at 1,000 calls a second; compare p50-µs
// (run with -benchtime=3000x).
func BenchmarkCallAt1000PerSecond(b *testing.B) {
	direct, via, token := benchTargets(b, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, benchAnswer)
	})
	b.Run("direct", func(b *testing.B) { paced(b, 1000, func() time.Duration { return call(b, direct, "sk-x", false) }) })
	b.Run("gateway", func(b *testing.B) { paced(b, 1000, func() time.Duration { return call(b, via, token, false) }) })
}

// BenchmarkFirstStreamedByte: a stream whose provider sends its first event
// at once and the rest 20 ms later; compare the first byte's p50-µs direct
// and through the gateway.
func BenchmarkFirstStreamedByte(b *testing.B) {
	direct, via, token := benchTargets(b, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"o"}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		time.Sleep(20 * time.Millisecond)
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1}}`+"\n\ndata: [DONE]\n\n")
	})
	b.Run("direct", func(b *testing.B) { paced(b, 200, func() time.Duration { return call(b, direct, "sk-x", true) }) })
	b.Run("gateway", func(b *testing.B) { paced(b, 200, func() time.Duration { return call(b, via, token, true) }) })
}
