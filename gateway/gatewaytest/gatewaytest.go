// Package gatewaytest is a fake model provider for tests: an httptest
// server speaking OpenAI Chat Completions, OpenAI Responses and Anthropic
// Messages as the real APIs do on the wire (the same JSON fields in the
// same order, the same server-sent events), streaming and not, with tool
// calls, and with the usage of each answer set by the test. Tests point a
// gateway (or an SDK) at it and compare what was recorded with what it
// served.
//
// It is not a model: an answer to a request that declares tools and does
// not end in a tool result calls the first tool declared, with arguments
// [Provider.ToolArguments]; any other request is answered with text. So an
// agent loop runs call → tool → answer, multi-turn, deterministically.
package gatewaytest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/proctor-evals/proctor/usage"
)

// Request is one request the provider answered, as the Usage hook sees it.
type Request struct {
	API    string // "chat.completions", "responses", "messages"
	Model  string
	Stream bool
	Body   []byte
	// Turn is the 0-based index of the request among those the provider
	// answered.
	Turn int
}

// Served is one answer the provider gave.
type Served struct {
	Request
	// Key is the credential the request carried: the Authorization
	// header's bearer token or the x-api-key header.
	Key   string
	Usage usage.Usage // as the answer reported it (Model set, CostUSD 0)
	// ToolCall is set when the answer called a tool.
	ToolCall bool
	// Completed is false when the client went away before the end.
	Completed bool
}

// Provider is the fake provider. Set its fields before the first request;
// they are read concurrently afterwards.
type Provider struct {
	*httptest.Server

	// Key, when set, is the only credential accepted; any other is
	// answered 401 in the provider's error shape.
	Key string
	// Usage gives each answer's usage (InputTokens all input, cache
	// tokens among them, as package usage counts); nil: input is the
	// body's length / 4, output 5 tokens per text chunk, no cache.
	Usage func(Request) usage.Usage
	// Chunks is the number of text deltas a streamed text answer has (3
	// when 0); each is Text.
	Chunks int
	// Text is each chunk of a text answer ("ok " when empty).
	Text string
	// ChunkDelay is waited before each streamed delta.
	ChunkDelay time.Duration
	// ToolArguments are a tool call's arguments, a JSON object ("{}" when
	// empty).
	ToolArguments string
	// Latency is waited before an answer's first byte (none when 0).
	Latency time.Duration
	// StreamError, when set and returning a type, ends a streamed
	// Messages answer after its first delta with an error event of that
	// type, as Anthropic does mid-stream ("overloaded_error"): the status
	// was 200 and no usage follows.
	StreamError func(Request) string
	// RateLimit, when set, limits the requests the provider answers (see
	// [RateLimit]); a request over it is answered 429 and not served.
	RateLimit *RateLimit

	mu     sync.Mutex
	served []Served
	bucket bucket
}

// New starts a provider; close it with Close.
func New() *Provider {
	p := &Provider{}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

// OpenAIBaseURL is the base URL an OpenAI client takes (with /v1).
func (p *Provider) OpenAIBaseURL() string { return p.URL + "/v1" }

// AnthropicBaseURL is the base URL an Anthropic client takes.
func (p *Provider) AnthropicBaseURL() string { return p.URL }

// Served returns the answers given so far, in order.
func (p *Provider) Served() []Served {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Served(nil), p.served...)
}

// Total is the usage of all answers served, as their usage fields said.
func (p *Provider) Total() usage.Usage {
	var t usage.Usage
	for _, s := range p.Served() {
		t = t.Add(s.Usage)
	}
	return t
}

func (p *Provider) serve(w http.ResponseWriter, r *http.Request) {
	var api string
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		api = "chat.completions"
	case r.Method == http.MethodPost && r.URL.Path == "/v1/responses":
		api = "responses"
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		api = "messages"
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"id":"gpt-4o-mini","object":"model","created":1721172741,"owned_by":"system"}]}`)
		return
	default:
		writeError(w, r, http.StatusNotFound, "not_found_error", "no route "+r.URL.Path)
		return
	}
	key := r.Header.Get("x-api-key")
	if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		key = b
	}
	if p.Key != "" && key != p.Key {
		writeError(w, r, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req struct {
		Model     string `json:"model"`
		Stream    bool   `json:"stream"`
		MaxTokens int64  `json:"max_tokens"`
		Thinking  *struct {
			Type         string `json:"type"`
			BudgetTokens int64  `json:"budget_tokens"`
		} `json:"thinking"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Model == "" {
		writeError(w, r, http.StatusBadRequest, "invalid_request_error", "the body is not a JSON object with a model")
		return
	}
	if t := req.Thinking; api == "messages" && t != nil && t.Type == "enabled" && (t.BudgetTokens < 1024 || t.BudgetTokens >= req.MaxTokens) {
		// As the Messages API refuses it.
		writeError(w, r, http.StatusBadRequest, "invalid_request_error", "`max_tokens` must be greater than `thinking.budget_tokens`, which must be at least 1024")
		return
	}
	if p.RateLimit != nil {
		admitted, done := p.limit(w, api, time.Now())
		if !admitted {
			return
		}
		defer done()
	}
	if p.Latency > 0 {
		select {
		case <-time.After(p.Latency):
		case <-r.Context().Done():
			return
		}
	}
	p.mu.Lock()
	rq := Request{API: api, Model: req.Model, Stream: req.Stream, Body: body, Turn: len(p.served)}
	p.served = append(p.served, Served{Request: rq, Key: key})
	i := len(p.served) - 1
	p.mu.Unlock()

	a := p.answer(rq)
	if p.StreamError != nil && api == "messages" {
		a.streamError = p.StreamError(rq)
	}
	var completed bool
	if req.Stream {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		completed = a.stream(w, r, p.ChunkDelay, includeUsage(api, body))
	} else {
		w.Header().Set("Content-Type", "application/json")
		_, err := w.Write(a.json())
		completed = err == nil
	}
	p.mu.Lock()
	p.served[i].Usage, p.served[i].ToolCall, p.served[i].Completed = a.usage, a.tool != "", completed
	if !a.usageSent {
		p.served[i].Usage = usage.Usage{}
	}
	p.mu.Unlock()
}

// includeUsage reports whether a Chat Completions stream asked for its
// usage chunk (stream_options.include_usage); the other APIs always send it.
func includeUsage(api string, body []byte) bool {
	if api != "chat.completions" {
		return true
	}
	var r struct {
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	json.Unmarshal(body, &r)
	return r.StreamOptions.IncludeUsage
}

func writeError(w http.ResponseWriter, r *http.Request, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if r.Header.Get("anthropic-version") != "" {
		fmt.Fprintf(w, `{"type":"error","error":{"type":%s,"message":%s}}`, q(typ), q(msg))
		return
	}
	fmt.Fprintf(w, `{"error":{"message":%s,"type":%s,"param":null,"code":null}}`, q(msg), q(typ))
}

// q is s as a JSON string.
func q(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}
