// Package anthropic is a [judge.Model] over the Anthropic Messages API:
// POST {base}/v1/messages with the x-api-key and anthropic-version
// (2023-06-01) headers.
//
// # Configuration
//
// [New] takes [Options]; empty fields fall back to ANTHROPIC_BASE_URL
// (default https://api.anthropic.com), ANTHROPIC_API_KEY and
// ANTHROPIC_MODEL. The model has no default.
//
// # Behaviour
//
// Complete makes one HTTP request: no retries, no concurrency limit. Wrap
// the client with the decorators that serve every provider alike:
//
//	grader := judge.Retry(judge.Limit(anthropic.New(nil), 8), nil)
//
// retries 429, 5xx (529 overloaded included), connection errors and
// timed-out attempts with exponential backoff and full jitter, honouring
// Retry-After, and keeps 8 requests in flight at most (see the judge/openai
// package doc for why New does not wrap by itself). An HTTP error is a
// *[judge.APIError] with the status, the error type (rate_limit_error,
// overloaded_error…), the message and the Retry-After hint; a 4xx other
// than 408, 409 and 429 is permanent and is not sent again. A response
// body over [Options].MaxResponseBytes is an unscored error ("response
// too large"), never a cut body.
//
// The answer is the concatenation of the response's text content blocks
// (thinking and tool blocks are skipped). Usage comes from usage.input_tokens
// (plus the cache_creation_input_tokens and cache_read_input_tokens, which
// are priced as cache writes and reads) and usage.output_tokens; the cost
// from [DefaultPrices] (or [Options].Prices). stop_reason end_turn and
// stop_sequence normalize to [judge.StopEnd], max_tokens to
// [judge.StopMaxTokens], refusal to [judge.StopRefusal]. Streaming is off.
//
// # Why net/http and not github.com/anthropics/anthropic-sdk-go
//
// The SDK fits a base URL and the usage fields, but carries its own retry
// loop and a large generated API surface for one endpoint; the typed
// errors must behave the same as the OpenAI driver's, and retries are
// judge.Retry's, so both drivers share a small net/http core.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/judge/internal/httpapi"
	"github.com/proctor-evals/proctor/usage"
)

// DefaultBaseURL is the API's base when neither an option nor
// ANTHROPIC_BASE_URL gives one.
const DefaultBaseURL = "https://api.anthropic.com"

// Version is the anthropic-version header sent.
const Version = "2023-06-01"

// DefaultMaxTokens is the answer bound when a request sets none (the API
// requires one).
const DefaultMaxTokens = 1024

// DefaultPrices is the built-in price table, [usage.DefaultPrices], shared
// with the other provider's client and the model gateway (its date and
// source are stated there). Prices change: override with [Options].Prices.
// Models missing there cost 0, they are never guessed.
var DefaultPrices = usage.DefaultPrices

// Client is a Messages API model. It is safe for concurrent use.
type Client struct {
	base, key, model string
	prices           judge.Prices
	http             *httpapi.Client
}

// Options configures a Client. The zero value (and nil) is valid: every
// empty field means its default.
type Options struct {
	// BaseURL is the API base (with or without /v1); "":
	// ANTHROPIC_BASE_URL, else [DefaultBaseURL].
	BaseURL string
	// APIKey is sent as x-api-key; "": ANTHROPIC_API_KEY.
	APIKey string
	// Model is the model asked; "": ANTHROPIC_MODEL.
	Model string
	// Prices is the price table; nil: [DefaultPrices]. An empty table
	// prices nothing.
	Prices judge.Prices
	// HTTPClient sends the requests (transport, proxies, TLS); nil:
	// http.DefaultClient.
	HTTPClient *http.Client
	// MaxResponseBytes caps a response body; a longer one is unscored
	// ("response too large"). 0: 32 MiB.
	MaxResponseBytes int64
}

// New returns a client configured by opts and the environment.
func New(opts *Options) *Client {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.BaseURL == "" {
		o.BaseURL = os.Getenv("ANTHROPIC_BASE_URL")
	}
	if o.BaseURL == "" {
		o.BaseURL = DefaultBaseURL
	}
	if o.APIKey == "" {
		o.APIKey = os.Getenv("ANTHROPIC_API_KEY")
	}
	if o.Model == "" {
		o.Model = os.Getenv("ANTHROPIC_MODEL")
	}
	if o.Prices == nil {
		o.Prices = DefaultPrices
	}
	h := &httpapi.Client{Provider: "anthropic", HTTP: o.HTTPClient, MaxBody: o.MaxResponseBytes, ParseError: parseError}
	return &Client{base: strings.TrimSuffix(strings.TrimRight(o.BaseURL, "/"), "/v1"), key: o.APIKey, model: o.Model,
		prices: o.Prices, http: h}
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

// Complete asks the model, in one HTTP request. See the package
// documentation for errors.
func (c *Client) Complete(ctx context.Context, req judge.Request) (judge.Response, error) {
	if c.model == "" {
		return judge.Response{}, judge.Permanent(errors.New("anthropic: no model set (Options.Model or ANTHROPIC_MODEL)"))
	}
	body := request{Model: c.model, MaxTokens: req.MaxTokens, System: req.System, Messages: req.Messages, Temperature: req.Temperature}
	if body.MaxTokens <= 0 {
		body.MaxTokens = DefaultMaxTokens
	}
	b, err := json.Marshal(body)
	if err != nil {
		return judge.Response{}, judge.Permanent(fmt.Errorf("anthropic: encoding the request: %w", err))
	}
	h := http.Header{}
	h.Set("x-api-key", c.key)
	h.Set("anthropic-version", Version)
	ctx, span := httpapi.StartChat(ctx, "anthropic", c.model, c.base, &req, body.MaxTokens)
	raw, err := c.http.Post(ctx, c.base+"/v1/messages", h, b)
	if err != nil {
		span.End(nil, err)
		return judge.Response{}, err
	}
	resp, err := c.decode(raw)
	span.End(&resp, err)
	return resp, err
}

// decode reads a 2xx response body.
func (c *Client) decode(raw []byte) (judge.Response, error) {
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
		out.Usage = usage.Usage{InputTokens: in, OutputTokens: r.Usage.OutputTokens,
			CacheReadTokens: r.Usage.CacheReadInputTokens, CacheWriteTokens: r.Usage.CacheCreationInputTokens}
		out.Usage.CostUSD = c.prices.Cost(out.Model, out.Usage)
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
