package judge

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/proctor-evals/proctor/usage"
)

// Model is a language model a model-graded judge calls. Implementations
// for provider APIs live in subpackages: judge/openai (Chat Completions, also
// spoken by vLLM, llama.cpp and most gateways) and judge/anthropic
// (Messages). Any other provider fits by implementing this one method.
//
// Complete is called concurrently and must honour ctx. A provider's
// Complete makes one attempt: retries and concurrency limits are
// decorators that wrap any Model ([Retry], [Limit]). An error means the
// model could not be asked (an infrastructure fault), not that its answer
// was bad; it is permanent (see [Permanent]) when asking again cannot
// help, and unscored (errors.Is(err, [ErrUnscored])) when the model
// answered but the answer cannot be used (a body over the provider
// package's size cap), which a judge reports as unscored.
type Model interface {
	Complete(ctx context.Context, req Request) (Response, error)
}

// ModelFunc adapts a function to a Model: handy for tests and stand-ins.
type ModelFunc func(ctx context.Context, req Request) (Response, error)

// Complete calls f(ctx, req).
func (f ModelFunc) Complete(ctx context.Context, req Request) (Response, error) { return f(ctx, req) }

// Message is one turn of a conversation.
type Message struct {
	Role    string `json:"role"` // "user" or "assistant"
	Content string `json:"content"`
}

// Request is one completion request.
type Request struct {
	System      string    `json:"system,omitempty"`
	Messages    []Message `json:"messages"`
	MaxTokens   int       `json:"max_tokens,omitempty"`  // 0: the provider package's default
	Temperature *float64  `json:"temperature,omitempty"` // nil: the provider's default
}

// Response is a model's answer.
type Response struct {
	Text string `json:"text"`
	// Usage is the call's tokens and cost, from the provider's usage
	// fields and the provider package's price table.
	Usage usage.Usage `json:"usage,omitzero"`
	// StopReason is why the model stopped, normalized by the provider
	// package to one of the Stop constants when it maps, else the
	// provider's own value.
	StopReason string `json:"stop_reason,omitempty"`
	// Model is the model that answered, as the provider names it.
	Model string `json:"model,omitempty"`
}

// Normalized stop reasons.
const (
	StopEnd       = "end"        // a natural end or a stop sequence
	StopMaxTokens = "max_tokens" // truncated at the token limit
	StopRefusal   = "refusal"    // refused or filtered
)

// APIError is a provider API's error response. Provider packages return it
// (possibly wrapped) for a non-2xx status.
type APIError struct {
	Provider   string // "openai", "anthropic"
	StatusCode int
	Type       string // the provider's error type or code, if it gave one
	Message    string // the provider's message, or the start of the body
	// RetryAfter is the provider's Retry-After hint, 0 if none; [Retry]
	// waits for it instead of its backoff.
	RetryAfter time.Duration
}

// Permanent reports whether the request itself is wrong, so that sending
// it again cannot succeed: a 4xx status other than 408 (timeout), 409
// (conflict) and 429 (rate limit): 400, 401, 403, 404, 413, 422… A 5xx
// (Anthropic's 529 overloaded among them) is not permanent. [Retry] and
// the eval engine read it through the interface{ Permanent() bool }
// contract.
func (e *APIError) Permanent() bool {
	switch e.StatusCode {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooManyRequests:
		return false
	}
	return e.StatusCode >= 400 && e.StatusCode < 500
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: HTTP %d", e.Provider, e.StatusCode)
	if e.Type != "" {
		b.WriteString(" " + e.Type)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// Price is what a model costs, in US dollars per million tokens: the type
// of package usage, which holds the price table the judges' clients and the
// model gateway share.
type Price = usage.Price

// Prices maps model names to prices; see [usage.Prices] for the lookup
// (exact name, else the longest prefix followed by "-") and the cost.
type Prices = usage.Prices
