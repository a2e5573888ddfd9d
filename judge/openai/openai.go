// Package openai is a [judge.Model] over the OpenAI Chat Completions API:
// POST {base}/chat/completions. It is also what vLLM, llama.cpp's server,
// Ollama, LiteLLM and most gateways speak, so pointing the base URL at any
// of them works.
//
// # Configuration
//
// [New] reads OPENAI_BASE_URL (default https://api.openai.com/v1) and
// OPENAI_API_KEY (optional: local servers need none); options override
// both. The model has no default: set it with [WithModel] (or
// OPENAI_MODEL).
//
// # Behaviour
//
// A call is retried on 408, 409, 429, 5xx, connection errors and an
// attempt's timeout, with exponential backoff and full jitter, honouring a
// Retry-After header (seconds or an HTTP date; a hint over two minutes ends
// the retries); other statuses fail at once. Attempts are bounded
// ([WithMaxAttempts], default 4) and each has its own timeout
// ([WithTimeout], default 2 minutes). A semaphore bounds the requests in
// flight per client ([WithConcurrency], default 16), apart from the eval's
// episode concurrency: share one client between judges to share its limit.
// An HTTP error is a *[judge.APIError] with the status, the provider's
// error type and message, and whether it was retryable.
//
// Usage comes from the response's usage.prompt_tokens and
// usage.completion_tokens; the cost from [DefaultPrices] (or
// [WithPrices]) by the model the response names. Streaming is off.
//
// # Why net/http and not github.com/openai/openai-go
//
// The official SDK fits a base URL and usage fields, but it brings its own
// retry loop (with its own backoff and Retry-After handling), a large
// dependency tree, and request types that track the newest OpenAI features
// rather than the common subset gateways speak (max_tokens versus
// max_completion_tokens, for one). A judge needs one endpoint, retries and
// a concurrency limit it controls, typed errors shared with the Anthropic
// driver, and nothing else: about 150 lines of net/http.
package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/judge/internal/httpapi"
)

// DefaultBaseURL is the API's base when neither an option nor
// OPENAI_BASE_URL gives one.
const DefaultBaseURL = "https://api.openai.com/v1"

// DefaultMaxTokens is the answer bound when a request sets none.
const DefaultMaxTokens = 1024

// DefaultPrices are list prices in USD per million tokens (standard tier,
// no caching), as published in 2025. Prices change: override with
// [WithPrices]. Models missing here cost 0, they are never guessed.
var DefaultPrices = judge.Prices{
	"gpt-4o":       {Input: 2.50, Output: 10},
	"gpt-4o-mini":  {Input: 0.15, Output: 0.60},
	"gpt-4.1":      {Input: 2, Output: 8},
	"gpt-4.1-mini": {Input: 0.40, Output: 1.60},
	"gpt-4.1-nano": {Input: 0.10, Output: 0.40},
	"gpt-5":        {Input: 1.25, Output: 10},
	"gpt-5-mini":   {Input: 0.25, Output: 2},
	"gpt-5-nano":   {Input: 0.05, Output: 0.40},
	"o3":           {Input: 2, Output: 8},
	"o4-mini":      {Input: 1.10, Output: 4.40},
}

// Client is a Chat Completions model. It is safe for concurrent use.
type Client struct {
	base, key, model string
	tokensField      string
	prices           judge.Prices
	http             *httpapi.Client
}

// Option configures a Client.
type Option func(*config)

type config struct {
	base, key, model, tokensField string
	prices                        judge.Prices
	httpClient                    *http.Client
	attempts, concurrency         int
	timeout, backoff, maxBackoff  time.Duration
}

// WithBaseURL sets the API base, e.g. "http://localhost:8000/v1" for vLLM.
func WithBaseURL(u string) Option { return func(c *config) { c.base = u } }

// WithAPIKey sets the bearer token.
func WithAPIKey(k string) Option { return func(c *config) { c.key = k } }

// WithModel sets the model asked.
func WithModel(m string) Option { return func(c *config) { c.model = m } }

// WithPrices replaces the price table.
func WithPrices(p judge.Prices) Option { return func(c *config) { c.prices = p } }

// WithHTTPClient sets the HTTP client (transport, proxies, TLS).
func WithHTTPClient(h *http.Client) Option { return func(c *config) { c.httpClient = h } }

// WithMaxAttempts bounds the tries per call, the first included; default 4.
func WithMaxAttempts(n int) Option { return func(c *config) { c.attempts = n } }

// WithConcurrency bounds the requests in flight; default 16.
func WithConcurrency(n int) Option { return func(c *config) { c.concurrency = n } }

// WithTimeout bounds each attempt; default 2 minutes.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithBackoff sets the base and the cap of the exponential backoff between
// retries; default 500ms and 30s.
func WithBackoff(base, maxBackoff time.Duration) Option {
	return func(c *config) { c.backoff, c.maxBackoff = base, maxBackoff }
}

// WithMaxTokensField names the request field that bounds the answer:
// "max_tokens" (what vLLM, llama.cpp and most gateways read) or
// "max_completion_tokens" (what OpenAI's reasoning models require). The
// default is max_completion_tokens for api.openai.com and max_tokens
// elsewhere.
func WithMaxTokensField(f string) Option { return func(c *config) { c.tokensField = f } }

// New returns a client configured by the environment and opts.
func New(opts ...Option) *Client {
	cfg := config{base: os.Getenv("OPENAI_BASE_URL"), key: os.Getenv("OPENAI_API_KEY"), model: os.Getenv("OPENAI_MODEL"),
		prices: DefaultPrices, httpClient: http.DefaultClient}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.base == "" {
		cfg.base = DefaultBaseURL
	}
	if cfg.tokensField == "" {
		cfg.tokensField = "max_tokens"
		if u, err := url.Parse(cfg.base); err == nil && u.Host == "api.openai.com" {
			cfg.tokensField = "max_completion_tokens"
		}
	}
	h := httpapi.New("openai", cfg.concurrency)
	h.HTTP = cfg.httpClient
	if cfg.attempts > 0 {
		h.MaxAttempts = cfg.attempts
	}
	if cfg.timeout != 0 {
		h.Timeout = max(cfg.timeout, 0)
	}
	if cfg.backoff > 0 {
		h.Backoff = cfg.backoff
	}
	if cfg.maxBackoff > 0 {
		h.MaxBackoff = cfg.maxBackoff
	}
	h.ParseError = parseError
	return &Client{base: strings.TrimRight(cfg.base, "/"), key: cfg.key, model: cfg.model,
		tokensField: cfg.tokensField, prices: cfg.prices, http: h}
}

// Model returns the model the client asks.
func (c *Client) Model() string { return c.model }

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type response struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content *string `json:"content"`
			Refusal *string `json:"refusal"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
}

// Complete asks the model. See the package documentation for retries,
// limits and errors.
func (c *Client) Complete(ctx context.Context, req judge.Request) (judge.Response, error) {
	if c.model == "" {
		return judge.Response{}, fmt.Errorf("openai: no model set (WithModel or OPENAI_MODEL)")
	}
	msgs := make([]message, 0, len(req.Messages)+1)
	if req.System != "" {
		msgs = append(msgs, message{"system", req.System})
	}
	for _, m := range req.Messages {
		msgs = append(msgs, message{m.Role, m.Content})
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	body := map[string]any{"model": c.model, "messages": msgs, c.tokensField: maxTokens, "stream": false}
	if req.Temperature != nil {
		body["temperature"] = *req.Temperature
	}
	b, err := json.Marshal(body)
	if err != nil {
		return judge.Response{}, fmt.Errorf("openai: encoding the request: %w", err)
	}
	h := http.Header{}
	if c.key != "" {
		h.Set("Authorization", "Bearer "+c.key)
	}
	raw, err := c.http.Post(ctx, c.base+"/chat/completions", h, b)
	if err != nil {
		return judge.Response{}, err
	}
	var r response
	if err := json.Unmarshal(raw, &r); err != nil {
		return judge.Response{}, fmt.Errorf("openai: decoding the response: %w", err)
	}
	if len(r.Choices) == 0 {
		return judge.Response{}, fmt.Errorf("openai: the response has no choices")
	}
	ch := r.Choices[0]
	out := judge.Response{Model: r.Model, StopReason: stopReason(ch.FinishReason)}
	if out.Model == "" {
		out.Model = c.model
	}
	if ch.Message.Content != nil {
		out.Text = *ch.Message.Content
	}
	if ch.Message.Refusal != nil && *ch.Message.Refusal != "" {
		out.Text, out.StopReason = *ch.Message.Refusal, judge.StopRefusal
	}
	if r.Usage != nil {
		out.Usage = harness.Usage{InputTokens: r.Usage.PromptTokens, OutputTokens: r.Usage.CompletionTokens}
		out.Usage.CostUSD = c.prices.Cost(out.Model, out.Usage.InputTokens, out.Usage.OutputTokens)
	}
	return out, nil
}

func stopReason(s string) string {
	switch s {
	case "stop":
		return judge.StopEnd
	case "length":
		return judge.StopMaxTokens
	case "content_filter":
		return judge.StopRefusal
	}
	return s
}

func parseError(body []byte) (typ, msg string) {
	var e struct {
		Error struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return "", ""
	}
	typ = e.Error.Type
	if code := strings.Trim(string(e.Error.Code), `"`); code != "" && code != "null" {
		if typ != "" {
			typ += "/"
		}
		typ += code
	}
	return typ, e.Error.Message
}

var _ judge.Model = (*Client)(nil)
