// Package gateway is the model gateway: an HTTP reverse proxy between an
// agent in a sandbox and its model provider that sees, prices and caps every
// call, and keeps the provider's key outside the sandbox.
//
// The engine starts one [Gateway] per process (per worker in a cluster run)
// and, for each episode, calls [Gateway.Open] with the episode's [Meter]:
// the token it gets back is the API key the episode's sandbox presents, and
// [Env] gives the variables the official SDKs and agent CLIs read to reach
// the gateway with it. The gateway knows episodes only through [Meter]; it
// imports nothing of the engine.
//
// # Wire protocols
//
// Three APIs are metered, streaming (server-sent events) or not:
//
//	POST /v1/chat/completions   OpenAI Chat Completions  → Options.OpenAI
//	POST /v1/responses          OpenAI Responses         → Options.OpenAI
//	POST /v1/messages           Anthropic Messages       → Options.Anthropic
//
// Two read-only paths pass through, authenticated the same way and recorded
// with no usage, because agent CLIs call them: GET /v1/models[/{id}]
// (Anthropic when the request carries an anthropic-version header, else
// OpenAI) and POST /v1/messages/count_tokens (Anthropic). Every other path
// is refused with 404 in the provider's error shape and never reaches the
// provider: the gateway is a metered model endpoint, not an open relay.
//
// Usage comes from the provider's own answer: the final usage object of a
// JSON response; in a stream, the last chunk of a Chat Completions stream
// (the gateway sets stream_options.include_usage when the agent did not,
// and forwards that chunk), the response.completed event of a Responses
// stream, Anthropic's message_start and message_delta events. Streams are
// parsed as they pass, never buffered whole. A stream that ends before its
// usage is priced from what was forwarded (input from the request's size,
// output from the text deltas, about 4 bytes a token) and recorded as cut.
//
// # Credentials
//
// Tokens are 256-bit random, compared in constant time, never logged. A
// call without a valid token (none, another gateway's, an ended episode's)
// is answered 401 in the provider's error shape and never forwarded. The
// provider key is set by the gateway only: the inbound Authorization and
// x-api-key headers are removed before forwarding.
//
// # Caps
//
// Before forwarding, the gateway asks the meter what the episode may still
// spend. A call that would start with nothing left is refused (429 in the
// provider's error shape, which agent CLIs show as an API error); a call
// that starts has its answer bound (max_completion_tokens,
// max_output_tokens or max_tokens) clamped to what is left, in tokens and,
// where the model's output price is known, in dollars. A streamed answer
// whose running estimate crosses what was left is cut at an event boundary:
// the agent receives the provider's error event and the end of the stream,
// and the call is recorded with Cut "cap".
//
// # Rate governing
//
// Calls to each provider, model and key wait in a lane held within an
// adaptive limit (AIMD on congestion answers, the providers' Retry-After
// and rate-limit headers honoured); a congestion answer is waited out and
// sent again, within a bound, rather than passed to the agent. Workers of
// a distributed run share their lanes ([Gateway.ShareLimits]). See
// governor.go and docs/gateway.md.
package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/proctor-evals/proctor/usage"
)

// Default upstream base URLs. OpenAI's includes /v1, as OPENAI_BASE_URL
// does; Anthropic's does not, as ANTHROPIC_BASE_URL does not.
const (
	DefaultOpenAIBaseURL    = "https://api.openai.com/v1"
	DefaultAnthropicBaseURL = "https://api.anthropic.com"
)

// DefaultKeepBytes is Options.KeepBytes when zero.
const DefaultKeepBytes = 64 << 10

// maxRequestBytes bounds an agent's request body: a larger one is refused
// (413) rather than read into memory.
const maxRequestBytes = 32 << 20

// Upstream is a provider the gateway forwards to.
type Upstream struct {
	// BaseURL is the provider's API base; empty: the provider's public API
	// (DefaultOpenAIBaseURL, DefaultAnthropicBaseURL). A self-hosted or
	// compatible endpoint ("http://vllm:8000/v1") goes here.
	BaseURL string
	// Key is the provider's API key, sent as Authorization: Bearer
	// (OpenAI) or x-api-key (Anthropic). It never leaves the gateway for
	// the sandbox.
	Key string
}

// Options configure a Gateway. The zero value is valid (public endpoints,
// no keys: calls reach the provider unauthenticated).
type Options struct {
	// OpenAI serves /v1/chat/completions and /v1/responses; Anthropic
	// serves /v1/messages.
	OpenAI, Anthropic Upstream
	// Prices prices each call's usage; nil: usage.DefaultPrices. A model
	// missing from the table costs 0 (never guessed).
	Prices usage.Prices
	// Transport carries the calls to the providers; nil: a transport tuned
	// for many concurrent calls to few hosts.
	Transport http.RoundTripper
	// KeepBytes is how many bytes of a call's request and response the
	// call's record keeps; a larger body is recorded by its SHA-256 digest
	// only. 0: DefaultKeepBytes; negative: digests only.
	KeepBytes int
	// Governor tunes the rate governor, which holds the calls to each
	// provider, model and key within an adaptive limit (governor.go); the
	// zero value governs with the defaults.
	Governor GovernorOptions
}

// Gateway is the model gateway, an http.Handler. Safe for concurrent use.
type Gateway struct {
	o       Options
	openai  upstream
	anthro  upstream
	proxy   *httputil.ReverseProxy
	mu      sync.RWMutex
	tokens  map[string]*episode // by token id
	nowFunc func() time.Time
	gov     *governor // nil: Options.Governor.Off
	stores  stores    // the call store and development cache (replay.go)
}

// New returns a gateway for o; an error if an upstream's base URL does not
// parse as an absolute http(s) URL.
func New(o Options) (*Gateway, error) {
	if o.Prices == nil {
		o.Prices = usage.DefaultPrices
	}
	if o.KeepBytes == 0 {
		o.KeepBytes = DefaultKeepBytes
	}
	if o.Transport == nil {
		o.Transport = defaultTransport()
	}
	g := &Gateway{o: o, tokens: map[string]*episode{}, nowFunc: time.Now}
	var err error
	if g.openai, err = parseUpstream("openai", o.OpenAI, DefaultOpenAIBaseURL, "/v1"); err != nil {
		return nil, err
	}
	if g.anthro, err = parseUpstream("anthropic", o.Anthropic, DefaultAnthropicBaseURL, ""); err != nil {
		return nil, err
	}
	if !o.Governor.Off {
		g.gov = newGovernor(o.Governor, time.Now)
	}
	g.proxy = g.newProxy()
	return g, nil
}

// defaultTransport is http.DefaultTransport's settings with enough idle
// connections per host for one gateway's whole traffic to one provider.
func defaultTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 512
	t.IdleConnTimeout = 90 * time.Second
	t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return t
}

// Env returns the variables the official SDKs and agent CLIs read, for a
// sandbox that reaches the gateway at baseURL ("http://10.0.0.1:8080", no
// trailing path) with token: OPENAI_BASE_URL (baseURL + "/v1", as the
// OpenAI SDKs and Codex CLI expect), OPENAI_API_KEY, ANTHROPIC_BASE_URL
// (baseURL: the Anthropic SDKs and Claude Code append /v1) and
// ANTHROPIC_API_KEY (sent as x-api-key).
//
// ANTHROPIC_AUTH_TOKEN is left unset on purpose: with both it and
// ANTHROPIC_API_KEY set, the Anthropic SDKs log a warning and Claude Code
// reports an authentication conflict. The gateway accepts the token as
// Authorization: Bearer too, so a sandbox that sets ANTHROPIC_AUTH_TOKEN
// to it instead works the same.
func Env(baseURL, token string) map[string]string {
	baseURL = strings.TrimSuffix(baseURL, "/")
	return map[string]string{
		"OPENAI_BASE_URL":    baseURL + "/v1",
		"OPENAI_API_KEY":     token,
		"ANTHROPIC_BASE_URL": baseURL,
		"ANTHROPIC_API_KEY":  token,
	}
}

// Meter is the engine's side of one episode. Its methods are called
// concurrently (an agent may make several calls at once) and must not
// block for long: they are on the path of every call.
type Meter interface {
	// Remaining is what the episode may still spend, asked once per call
	// before it is forwarded: the call is refused when nothing is left, its
	// answer bound clamped to what is, and its stream cut when it crosses
	// it. Calls of one episode in flight together each see what was left
	// when they started, so together they may overshoot by what they
	// answer; the engine's own check after each Record ends the episode.
	Remaining() Budget
	// Record takes one finished, refused or cut call: the engine makes it
	// a "model" transcript event and adds its usage under the agent's
	// role and the call's model.
	Record(Call)
}

// Budget is what an episode may still spend. Capped false: no cap at all.
// When Capped, Tokens and CostUSD are both limits (a dimension the episode
// does not cap is math.MaxInt64 or math.Inf(1)); a call is refused once
// either is at or below zero.
type Budget struct {
	Tokens  int64
	CostUSD float64
	Capped  bool
}

// exhausted reports whether b leaves nothing to spend.
func (b Budget) exhausted() bool { return b.Capped && (b.Tokens <= 0 || b.CostUSD <= 0) }

// Call is one call through the gateway, as its Meter records it.
type Call struct {
	Provider string // "openai", "anthropic"
	// API is "chat.completions", "responses", "messages", or for a
	// passed-through path "models" or "count_tokens"; "" for a call
	// refused before its API was known (an unknown path).
	API    string
	Model  string // the model that answered, else the one asked for
	Status int    // the HTTP status the agent received
	Stream bool
	Start  time.Time
	// Duration runs from the request's arrival to the response's last
	// byte; FirstByte to its first byte (0 if none).
	Duration, FirstByte time.Duration
	// Usage is the provider's usage, priced; estimated when Cut is set and
	// the provider's usage never came.
	Usage usage.Usage
	// Request and Response are the bodies when within Options.KeepBytes,
	// else nil. A streamed response is kept as a JSON string of its
	// server-sent events. The digests are always set for a body that was
	// read (hex SHA-256 of the bytes on the wire).
	Request, Response             json.RawMessage
	RequestSHA256, ResponseSHA256 string
	// Cut says why a response ended early: "cap" (the gateway cut a
	// stream that crossed the episode's budget), "upstream" (the provider
	// ended it before its usage), "client" (the agent went away); "" when
	// it completed.
	Cut string
	// Err is what went wrong, for a call that did not complete with a
	// success status: refused (no budget, a malformed request), failed to
	// reach the provider, or cut.
	Err string
	// Throttled counts the provider's congestion answers (429, 503, 529)
	// to this call that the rate governor waited out and sent again;
	// Waited is how long the governor held the call in all (within
	// Duration).
	Throttled int
	Waited    time.Duration
	// Replay is how the call store answered it: ReplayReplayed (from the
	// episode's recording) or ReplayCached (from the development cache),
	// with Usage zero and Saved what it cost when it was bought; or
	// ReplayDiverged, the first live call of a replayed episode, whose
	// request differed from the recorded one. "" for any other call.
	Replay string
	Saved  usage.Usage
}

// Tracer is the optional interface of a Meter whose episode is traced: each
// call's span (GenAI semantic conventions) is a child of Span.
type Tracer interface {
	Span() trace.Span
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
