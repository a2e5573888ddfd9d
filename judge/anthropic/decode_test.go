package anthropic

import (
	"encoding/json"
	"testing"
)

// FuzzDecode reads arbitrary response and error bodies: never a panic, an
// answer only from valid JSON.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[{"type":"thinking","thinking":"x","signature":"s"},{"type":"text","text":"Matches.\n"},{"type":"text","text":"GRADE: C"}],"stop_reason":"end_turn","usage":{"input_tokens":900,"cache_read_input_tokens":100,"output_tokens":200}}`,
		`{"content":[],"stop_reason":"refusal"}`, `{"content": [`, `null`, `[]`, `{"content":[{"type":"text","text":1}]}`,
		`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, `{"error":"x"}`,
	} {
		f.Add([]byte(s))
	}
	c := New(&Options{BaseURL: "http://127.0.0.1:1", Model: "claude-sonnet-4"})
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
