package openai

import (
	"encoding/json"
	"testing"
)

// FuzzDecode reads arbitrary response and error bodies: never a panic, an
// answer only from valid JSON with a choice.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"Matches.\nGRADE: C","refusal":null},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":200}}`,
		`{"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't"},"finish_reason":"stop"}]}`,
		`{"choices":[]}`, `{"choices": [`, `null`, `[]`, `{"choices":[{"message":{"content":1}}]}`,
		`{"error":{"message":"Invalid value","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`,
		`{"error":{"message":"x","type":"requests","code":null}}`, `{"error":{"code":429}}`,
	} {
		f.Add([]byte(s))
	}
	c := New(&Options{BaseURL: "http://127.0.0.1:1/v1", Model: "gpt-4o-mini"})
	f.Fuzz(func(t *testing.T, b []byte) {
		parseError(b)
		resp, err := c.decode(b)
		if err != nil {
			return
		}
		if !json.Valid(b) {
			t.Fatalf("decoded invalid JSON %q", b)
		}
		if resp.Model == "" {
			t.Fatalf("no model in %+v", resp)
		}
	})
}
