// Package usage is what model calls consume and what they cost: the token
// counts of [Usage] and the price table of [Prices]. It is a leaf: the
// harness, the judges' clients, the model gateway and the report all speak
// it, and it imports only the standard library.
//
// # Counting convention
//
// InputTokens counts every input token of a call, cached or not: OpenAI's
// prompt_tokens already does; for Anthropic it is input_tokens +
// cache_read_input_tokens + cache_creation_input_tokens (Anthropic's
// input_tokens counts only the uncached rest). CacheReadTokens and
// CacheWriteTokens are subsets of InputTokens, ReasoningTokens a subset of
// OutputTokens, so that Tokens (input + output) is what a cap counts and
// no token is counted twice.
package usage

// Usage is what one or more model calls consumed.
type Usage struct {
	InputTokens  int64 `json:"input_tokens,omitempty"`  // all input, cached included
	OutputTokens int64 `json:"output_tokens,omitempty"` // all output, reasoning included
	// CacheReadTokens are input tokens read from the provider's prompt
	// cache (OpenAI's cached_tokens, Anthropic's cache_read_input_tokens).
	CacheReadTokens int64 `json:"cache_read_tokens,omitempty"`
	// CacheWriteTokens are input tokens written to the prompt cache
	// (Anthropic's cache_creation_input_tokens; OpenAI reports none).
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	// ReasoningTokens are output tokens spent on reasoning the answer does
	// not show (OpenAI's reasoning_tokens).
	ReasoningTokens int64   `json:"reasoning_tokens,omitempty"`
	CostUSD         float64 `json:"cost_usd,omitempty"`
	// Model names the model the usage was spent on ("gpt-4o"), when the
	// one recording it knows: the report splits cost by model with it.
	// A sum keeps the last name given.
	Model string `json:"model,omitempty"`
}

// Add returns the sum of u and v, named as v when v names a model, else
// as u.
func (u Usage) Add(v Usage) Usage {
	model := u.Model
	if v.Model != "" {
		model = v.Model
	}
	return Usage{
		InputTokens:      u.InputTokens + v.InputTokens,
		OutputTokens:     u.OutputTokens + v.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens + v.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
		ReasoningTokens:  u.ReasoningTokens + v.ReasoningTokens,
		CostUSD:          u.CostUSD + v.CostUSD,
		Model:            model,
	}
}

// Tokens is the input and output tokens together (cache and reasoning
// tokens are already among them).
func (u Usage) Tokens() int64 { return u.InputTokens + u.OutputTokens }
