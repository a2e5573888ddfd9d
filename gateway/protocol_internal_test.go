package gateway

import (
	"encoding/json"
	"testing"
)

var fuzzAPIs = []string{apiChat, apiResponses, apiMessages}

// FuzzUsageDecoders: any body or stream event, on any API, is decoded or
// refused with an error; a usage accepted is one no provider could
// contradict (no negative count, cache and reasoning within their totals).
func FuzzUsageDecoders(f *testing.F) {
	f.Add(uint8(0), "", []byte(`{"model":"m","usage":{"prompt_tokens":10,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":4}}}`))
	f.Add(uint8(1), "", []byte(`{"type":"response.completed","response":{"model":"m","usage":{"input_tokens":3,"output_tokens":1}}}`))
	f.Add(uint8(2), "message_start", []byte(`{"type":"message_start","message":{"model":"m","usage":{"input_tokens":3,"cache_read_input_tokens":9,"output_tokens":1}}}`))
	f.Add(uint8(2), "message_delta", []byte(`{"type":"message_delta","usage":{"output_tokens":-5}}`))
	f.Add(uint8(2), "error", []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	f.Add(uint8(0), "", []byte(`{"choices":[{"delta":{"content":"hi","tool_calls":[{"function":{"arguments":"{}"}}]}}],"usage":null}`))
	f.Fuzz(func(t *testing.T, which uint8, name string, data []byte) {
		api := fuzzAPIs[int(which)%len(fuzzAPIs)]
		for _, stream := range []bool{false, true} {
			c := counted{api: api, inputEstimate: 7}
			if stream {
				c.event(name, data)
				c.event(name, data) // a second event folds in
			} else {
				c.decodeJSON(data)
			}
			if c.final && check(c.usage) != nil {
				t.Fatalf("%s stream=%v: accepted %+v: %v", api, stream, c.usage, check(c.usage))
			}
			if est := c.estimate(); est.InputTokens < 0 || est.OutputTokens < 0 {
				t.Fatalf("negative estimate %+v", est)
			}
		}
	})
}

// FuzzRewrite: any request body is rewritten to valid JSON whose answer
// bound is within the limit, or refused with an error; never a panic.
func FuzzRewrite(f *testing.F) {
	f.Add(uint8(0), []byte(`{"model":"m","stream":true,"max_tokens":5000}`), int64(100))
	f.Add(uint8(1), []byte(`{"model":"m","max_output_tokens":"x"}`), int64(100))
	f.Add(uint8(2), []byte(`{"model":"m","max_tokens":null}`), int64(0))
	f.Add(uint8(0), []byte(`{"stream_options":[]}`), int64(3))
	f.Fuzz(func(t *testing.T, which uint8, body []byte, limit int64) {
		api := fuzzAPIs[int(which)%len(fuzzAPIs)]
		for _, stream := range []bool{false, true} {
			out, err := rewrite(api, body, stream, limit)
			if err != nil {
				continue
			}
			if !json.Valid(out) {
				t.Fatalf("%s: rewrote to invalid JSON %q", api, out)
			}
			if limit <= 0 {
				continue
			}
			var m map[string]json.RawMessage
			if json.Unmarshal(out, &m) != nil {
				continue // a body passed through unchanged
			}
			for _, f := range maxTokensFields[api] {
				var v int64
				if raw, ok := m[f]; ok && json.Unmarshal(raw, &v) == nil && v > limit {
					// The first bound set is the one clamped; a second, ignored
					// by the provider, may stay.
					if f == firstSet(m, api) {
						t.Fatalf("%s: %s = %d over the limit %d", api, f, v, limit)
					}
				}
			}
		}
	})
}

func firstSet(m map[string]json.RawMessage, api string) string {
	for _, f := range maxTokensFields[api] {
		if raw, ok := m[f]; ok && string(raw) != "null" {
			return f
		}
	}
	return ""
}
