// Package providerusage decodes the usage a model provider reports (the
// usage object of OpenAI's Chat Completions and Responses and of
// Anthropic's Messages) into usage.Usage, for the gateway and the judges'
// clients alike: one declaration of each wire shape.
package providerusage

import (
	"errors"

	"github.com/proctor-evals/proctor/usage"
)

// Chat is the usage object of an OpenAI Chat Completions response.
type Chat struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// Responses is the usage object of an OpenAI Responses response.
type Responses struct {
	InputTokens        int64 `json:"input_tokens"`
	OutputTokens       int64 `json:"output_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

// Messages is the usage object of an Anthropic Messages response or
// stream event; a field absent is nil.
type Messages struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             int64  `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
}

// ErrNegative is Check's error for a negative count.
var ErrNegative = errors.New("a negative token count")

// Usage is u as usage.Usage, or an error when no provider sends it (Check).
func (u Chat) Usage() (usage.Usage, error) {
	out := usage.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens,
		CacheReadTokens: u.PromptTokensDetails.CachedTokens, ReasoningTokens: u.CompletionTokensDetails.ReasoningTokens}
	return out, Check(out)
}

// Usage is u as usage.Usage, or an error when no provider sends it (Check).
func (u Responses) Usage() (usage.Usage, error) {
	out := usage.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.InputTokensDetails.CachedTokens, ReasoningTokens: u.OutputTokensDetails.ReasoningTokens}
	return out, Check(out)
}

// Merge folds an Anthropic usage object into u: message_start carries the
// input, message_delta the cumulative output (and, in newer API versions,
// the input again); a field absent leaves u's. It reports whether m held
// the input.
func (m Messages) Merge(u usage.Usage) (usage.Usage, bool, error) {
	inputSeen := m.InputTokens != nil
	if m.InputTokens != nil {
		read, write := u.CacheReadTokens, u.CacheWriteTokens
		if m.CacheReadInputTokens != nil {
			read = *m.CacheReadInputTokens
		}
		if m.CacheCreationInputTokens != nil {
			write = *m.CacheCreationInputTokens
		}
		// Anthropic's input_tokens is the uncached rest: the convention
		// counts all input.
		u.InputTokens, u.CacheReadTokens, u.CacheWriteTokens = *m.InputTokens+read+write, read, write
	}
	u.OutputTokens = m.OutputTokens
	return u, inputSeen, Check(u)
}

// Check rejects counts no provider sends: negative ones, or cache and
// reasoning subsets larger than what holds them.
func Check(u usage.Usage) error {
	if u.InputTokens < 0 || u.OutputTokens < 0 || u.CacheReadTokens < 0 || u.CacheWriteTokens < 0 || u.ReasoningTokens < 0 {
		return ErrNegative
	}
	if u.CacheReadTokens+u.CacheWriteTokens > u.InputTokens || u.ReasoningTokens > u.OutputTokens {
		return errors.New("cache or reasoning tokens exceed the tokens that contain them")
	}
	return nil
}
