// Package openai is a [judge.Model] over the OpenAI Chat Completions API:
// POST {base}/chat/completions. It is also what vLLM, llama.cpp's server,
// Ollama, LiteLLM and most gateways speak, so pointing the base URL at any
// of them works.
//
// # Configuration
//
// [New] takes [Options]; empty fields fall back to OPENAI_BASE_URL
// (default https://api.openai.com/v1), OPENAI_API_KEY (optional: local
// servers need none) and OPENAI_MODEL. The model has no default.
//
// # Behaviour
//
// Complete makes one HTTP request: no retries, no concurrency limit. Those
// are decorators over any [judge.Model], stated once for every provider:
//
//	grader := judge.Retry(judge.Limit(openai.New(nil), 8), nil)
//
// retries 429, 5xx, connection errors and timed-out attempts with
// exponential backoff and full jitter, honouring Retry-After, and keeps 8
// requests in flight at most. New returns the bare driver rather than a
// wrapped one so that a caller who adds judge.Retry does not multiply two
// retry loops (4 × 4 requests per call), and keeps the *Client's methods.
//
// An HTTP error is a *[judge.APIError] with the status, the provider's
// error type and message and the Retry-After hint; a 4xx other than 408,
// 409 and 429 is permanent (400, 401, 403, 404, 422…): neither judge.Retry
// nor the eval engine sends it again. A response body over
// [Options].MaxResponseBytes is an unscored error ("response too large"),
// never a cut body.
//
// Usage comes from the response's usage.prompt_tokens (of which
// prompt_tokens_details.cached_tokens are priced as cache reads) and
// usage.completion_tokens (reasoning_tokens among them); the cost from [DefaultPrices] (or
// [Options].Prices) by the model the response names. Streaming is off.
//
// # Why net/http and not github.com/openai/openai-go
//
// The official SDK fits a base URL and usage fields, but it brings its own
// retry loop (with its own backoff and Retry-After handling), a large
// dependency tree, and request types that track the newest OpenAI features
// rather than the common subset gateways speak (max_tokens versus
// max_completion_tokens, for one). A judge needs one endpoint and typed
// errors shared with the Anthropic driver, and nothing else: about 150
// lines of net/http.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/proctor-evals/proctor/internal/providerusage"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/judge/internal/httpapi"
	"github.com/proctor-evals/proctor/usage"
)

// DefaultBaseURL is the API's base when neither an option nor
// OPENAI_BASE_URL gives one.
const DefaultBaseURL = "https://api.openai.com/v1"

// DefaultMaxTokens is the answer bound when a request sets none.
const DefaultMaxTokens = 1024

// DefaultPrices is the built-in price table, [usage.DefaultPrices], shared
// with the other provider's client and the model gateway (its date and
// source are stated there). Prices change: override with [Options].Prices.
// Models missing there cost 0, they are never guessed.
var DefaultPrices = usage.DefaultPrices

// Client is a Chat Completions model. It is safe for concurrent use.
type Client struct {
	base, key, model string
	tokensField      string
	prices           judge.Prices
	http             *httpapi.Client
}

// Options configures a Client. The zero value (and nil) is valid: every
// empty field means its default.
type Options struct {
	// BaseURL is the API base, e.g. "http://localhost:8000/v1" for vLLM;
	// "": OPENAI_BASE_URL, else [DefaultBaseURL].
	BaseURL string
	// APIKey is the bearer token; "": OPENAI_API_KEY (none if unset).
	APIKey string
	// Model is the model asked; "": OPENAI_MODEL.
	Model string
	// Prices is the price table; nil: [DefaultPrices]. An empty table
	// prices nothing.
	Prices judge.Prices
	// HTTPClient sends the requests (transport, proxies, TLS); nil:
	// http.DefaultClient.
	HTTPClient *http.Client
	// MaxTokensField names the request field that bounds the answer:
	// "max_tokens" (what vLLM, llama.cpp and most gateways read) or
	// "max_completion_tokens" (what OpenAI's reasoning models require).
	// "": max_completion_tokens for api.openai.com, max_tokens elsewhere.
	MaxTokensField string
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
		o.BaseURL = os.Getenv("OPENAI_BASE_URL")
	}
	if o.BaseURL == "" {
		o.BaseURL = DefaultBaseURL
	}
	if o.APIKey == "" {
		o.APIKey = os.Getenv("OPENAI_API_KEY")
	}
	if o.Model == "" {
		o.Model = os.Getenv("OPENAI_MODEL")
	}
	if o.Prices == nil {
		o.Prices = DefaultPrices
	}
	if o.MaxTokensField == "" {
		o.MaxTokensField = "max_tokens"
		if u, err := url.Parse(o.BaseURL); err == nil && u.Host == "api.openai.com" {
			o.MaxTokensField = "max_completion_tokens"
		}
	}
	h := &httpapi.Client{Provider: "openai", HTTP: o.HTTPClient, MaxBody: o.MaxResponseBytes, ParseError: parseError}
	return &Client{base: strings.TrimRight(o.BaseURL, "/"), key: o.APIKey, model: o.Model,
		tokensField: o.MaxTokensField, prices: o.Prices, http: h}
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
	Usage *providerusage.Chat `json:"usage"`
}

// Complete asks the model, in one HTTP request. See the package
// documentation for errors.
func (c *Client) Complete(ctx context.Context, req judge.Request) (judge.Response, error) {
	if c.model == "" {
		return judge.Response{}, judge.Permanent(errors.New("openai: no model set (Options.Model or OPENAI_MODEL)"))
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
		return judge.Response{}, judge.Permanent(fmt.Errorf("openai: encoding the request: %w", err))
	}
	h := http.Header{}
	if c.key != "" {
		h.Set("Authorization", "Bearer "+c.key)
	}
	ctx, span := httpapi.StartChat(ctx, "openai", c.model, c.base, &req, maxTokens)
	raw, err := c.http.Post(ctx, c.base+"/chat/completions", h, b)
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
		return judge.Response{}, fmt.Errorf("openai: decoding the response: %w", err)
	}
	if len(r.Choices) == 0 {
		return judge.Response{}, errors.New("openai: the response has no choices")
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
		u, err := r.Usage.Usage()
		if err != nil {
			return judge.Response{}, fmt.Errorf("openai: the response's usage: %w", err)
		}
		out.Usage = u
		out.Usage.CostUSD = c.prices.Cost(out.Model, out.Usage)
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
