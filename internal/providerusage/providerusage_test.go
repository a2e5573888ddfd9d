package providerusage

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/usage"
)

func TestEachShapeCountsAllInputAndItsSubsets(t *testing.T) {
	var c Chat
	require.NoError(t, json.Unmarshal([]byte(`{"prompt_tokens":100,"completion_tokens":30,"prompt_tokens_details":{"cached_tokens":60},"completion_tokens_details":{"reasoning_tokens":10}}`), &c))
	u, err := c.Usage()
	require.NoError(t, err)
	require.Equal(t, usage.Usage{InputTokens: 100, OutputTokens: 30, CacheReadTokens: 60, ReasoningTokens: 10}, u)

	var r Responses
	require.NoError(t, json.Unmarshal([]byte(`{"input_tokens":100,"output_tokens":30,"input_tokens_details":{"cached_tokens":60},"output_tokens_details":{"reasoning_tokens":10}}`), &r))
	u, err = r.Usage()
	require.NoError(t, err)
	require.Equal(t, usage.Usage{InputTokens: 100, OutputTokens: 30, CacheReadTokens: 60, ReasoningTokens: 10}, u)

	var m Messages // Anthropic's input_tokens is the uncached rest
	require.NoError(t, json.Unmarshal([]byte(`{"input_tokens":40,"output_tokens":30,"cache_creation_input_tokens":20,"cache_read_input_tokens":40}`), &m))
	u, seen, err := m.Merge(usage.Usage{})
	require.NoError(t, err)
	require.True(t, seen)
	require.Equal(t, usage.Usage{InputTokens: 100, OutputTokens: 30, CacheReadTokens: 40, CacheWriteTokens: 20}, u)

	c.PromptTokens = -1
	_, err = c.Usage()
	require.ErrorIs(t, err, ErrNegative)
	r.InputTokens = 10 // fewer than the 60 cached
	_, err = r.Usage()
	require.Error(t, err)
}

// FuzzUsage: whatever a provider sends, a usage accepted is one Check
// accepts: no negative count, no subset larger than what holds it.
func FuzzUsage(f *testing.F) {
	f.Add([]byte(`{"prompt_tokens":100,"completion_tokens":30,"prompt_tokens_details":{"cached_tokens":60}}`))
	f.Add([]byte(`{"input_tokens":40,"output_tokens":30,"cache_read_input_tokens":40}`))
	f.Add([]byte(`{"input_tokens":-1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var c Chat
		var r Responses
		var m Messages
		accepted := func(u usage.Usage, err error) {
			if err == nil && Check(u) != nil {
				t.Fatalf("accepted %+v from %q", u, b)
			}
		}
		if json.Unmarshal(b, &c) == nil {
			accepted(c.Usage())
		}
		if json.Unmarshal(b, &r) == nil {
			accepted(r.Usage())
		}
		if json.Unmarshal(b, &m) == nil {
			u, _, err := m.Merge(usage.Usage{})
			accepted(u, err)
		}
	})
}
