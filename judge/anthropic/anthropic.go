// Package anthropic is a [judge.Model] over the Anthropic Messages API:
// POST {base}/v1/messages with the x-api-key and anthropic-version
// (2023-06-01) headers.
//
// # Configuration
//
// [New] reads ANTHROPIC_BASE_URL (default https://api.anthropic.com) and
// ANTHROPIC_API_KEY; options override both. The model has no default: set
// it with [WithModel] (or ANTHROPIC_MODEL).
//
// # Behaviour
//
// A call is retried on 408, 409, 429, 5xx (529 overloaded included),
// connection errors and an attempt's timeout, with exponential backoff and
// full jitter, honouring a Retry-After header (seconds or an HTTP date; a
// hint over two minutes ends the retries); other statuses fail at once.
// Attempts are bounded ([WithMaxAttempts], default 4) and each has its own
// timeout ([WithTimeout], default 2 minutes). A semaphore bounds the
// requests in flight per client ([WithConcurrency], default 16), apart from
// the eval's episode concurrency. An HTTP error is a *[judge.APIError] with
// the status, the error type (rate_limit_error, overloaded_error…) and
// message, and whether it was retryable.
//
// The answer is the concatenation of the response's text content blocks
// (thinking and tool blocks are skipped). Usage comes from usage.input_tokens
// (plus the cache_creation_input_tokens and cache_read_input_tokens, priced
// as input: an upper bound when caching is on) and usage.output_tokens; the
// cost from [DefaultPrices] (or [WithPrices]). stop_reason end_turn and
// stop_sequence normalize to [judge.StopEnd], max_tokens to
// [judge.StopMaxTokens], refusal to [judge.StopRefusal]. Streaming is off.
//
// # Why net/http and not github.com/anthropics/anthropic-sdk-go
//
// The SDK fits a base URL and the usage fields, but carries its own retry
// loop and a large generated API surface for one endpoint; the retries, the
// concurrency limit and the typed errors must behave the same as the
// OpenAI driver's, so both share a small net/http core.
package anthropic

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/judge/internal/httpapi"
)

// DefaultBaseURL is the API's base when neither an option nor
// ANTHROPIC_BASE_URL gives one.
const DefaultBaseURL = "https://api.anthropic.com"

// Version is the anthropic-version header sent.
const Version = "2023-06-01"

// DefaultMaxTokens is the answer bound when a request sets none (the API
// requires one).
const DefaultMaxTokens = 1024

// DefaultPrices are list prices in USD per million tokens (no caching or
// batch discounts), as published in 2025. Prices change: override with
// [WithPrices]. Models missing here cost 0, they are never guessed. Dated
// model IDs ("claude-sonnet-4-20250514") match by prefix.
var DefaultPrices = judge.Prices{
	"claude-opus-4-5":   {Input: 5, Output: 25},
	"claude-opus-4-1":   {Input: 15, Output: 75},
	"claude-opus-4":     {Input: 15, Output: 75},
	"claude-sonnet-4-5": {Input: 3, Output: 15},
	"claude-sonnet-4":   {Input: 3, Output: 15},
	"claude-3-7-sonnet": {Input: 3, Output: 15},
	"claude-haiku-4-5":  {Input: 1, Output: 5},
	"claude-3-5-haiku":  {Input: 0.80, Output: 4},
}

// Client is a Messages API model. It is safe for concurrent use.
type Client struct {
	base, key, model string
	prices           judge.Prices
	http             *httpapi.Client
}

// Option configures a Client.
type Option func(*config)

type config struct {
	base, key, model             string
	prices                       judge.Prices
	httpClient                   *http.Client
	attempts, concurrency        int
	timeout, backoff, maxBackoff time.Duration
}

// WithBaseURL sets the API base (without /v1).
func WithBaseURL(u string) Option { return func(c *config) { c.base = u } }

// WithAPIKey sets the key sent as x-api-key.
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

// New returns a client configured by the environment and opts.
func New(opts ...Option) *Client {
	cfg := config{base: os.Getenv("ANTHROPIC_BASE_URL"), key: os.Getenv("ANTHROPIC_API_KEY"), model: os.Getenv("ANTHROPIC_MODEL"),
		prices: DefaultPrices, httpClient: http.DefaultClient}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.base == "" {
		cfg.base = DefaultBaseURL
	}
	h := httpapi.New("anthropic", cfg.concurrency)
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
	return &Client{base: strings.TrimSuffix(strings.TrimRight(cfg.base, "/"), "/v1"), key: cfg.key, model: cfg.model,
		prices: cfg.prices, http: h}
}

// Model returns the model the client asks.
func (c *Client) Model() string { return c.model }

type request struct {
	Model       string          `json:"model"`
	MaxTokens   int             `json:"max_tokens"`
	System      string          `json:"system,omitempty"`
	Messages    []judge.Message `json:"messages"`
	Temperature *float64        `json:"temperature,omitempty"`
	Stream      bool            `json:"stream"`
}

type response struct {
	Model   string `json:"model"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StopReason string `json:"stop_reason"`
	Usage      *struct {
		InputTokens              int64 `json:"input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	} `json:"usage"`
}

// Complete asks the model. See the package documentation for retries,
// limits and errors.
func (c *Client) Complete(ctx context.Context, req judge.Request) (judge.Response, error) {
	if c.model == "" {
		return judge.Response{}, fmt.Errorf("anthropic: no model set (WithModel or ANTHROPIC_MODEL)")
	}
	body := request{Model: c.model, MaxTokens: req.MaxTokens, System: req.System, Messages: req.Messages, Temperature: req.Temperature}
	if body.MaxTokens <= 0 {
		body.MaxTokens = DefaultMaxTokens
	}
	b, err := json.Marshal(body)
	if err != nil {
		return judge.Response{}, fmt.Errorf("anthropic: encoding the request: %w", err)
	}
	h := http.Header{}
	h.Set("x-api-key", c.key)
	h.Set("anthropic-version", Version)
	raw, err := c.http.Post(ctx, c.base+"/v1/messages", h, b)
	if err != nil {
		return judge.Response{}, err
	}
	var r response
	if err := json.Unmarshal(raw, &r); err != nil {
		return judge.Response{}, fmt.Errorf("anthropic: decoding the response: %w", err)
	}
	out := judge.Response{Model: r.Model, StopReason: stopReason(r.StopReason)}
	if out.Model == "" {
		out.Model = c.model
	}
	var text strings.Builder
	for _, blk := range r.Content {
		if blk.Type == "text" {
			text.WriteString(blk.Text)
		}
	}
	out.Text = text.String()
	if r.Usage != nil {
		in := r.Usage.InputTokens + r.Usage.CacheCreationInputTokens + r.Usage.CacheReadInputTokens
		out.Usage = harness.Usage{InputTokens: in, OutputTokens: r.Usage.OutputTokens}
		out.Usage.CostUSD = c.prices.Cost(out.Model, in, r.Usage.OutputTokens)
	}
	return out, nil
}

func stopReason(s string) string {
	switch s {
	case "end_turn", "stop_sequence":
		return judge.StopEnd
	case "max_tokens", "model_context_window_exceeded":
		return judge.StopMaxTokens
	case "refusal":
		return judge.StopRefusal
	}
	return s
}

func parseError(body []byte) (typ, msg string) {
	var e struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return "", ""
	}
	return e.Error.Type, e.Error.Message
}

var _ judge.Model = (*Client)(nil)
