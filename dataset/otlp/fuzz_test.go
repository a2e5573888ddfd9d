package otlp

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/proctor-evals/proctor/dataset"
)

// FuzzLine feeds one line to the decoder and the span-to-sample step: they
// must not panic, their errors must be *dataset.RowError, and every sample
// must have a valid ID and JSON input and output (the record carries them).
func FuzzLine(f *testing.F) {
	if b, err := os.ReadFile("testdata/traces.jsonl"); err == nil {
		for _, l := range splitLines(b) {
			f.Add(l)
		}
	}
	for _, s := range []string{
		`{}`, `[]`, `null`, `{"resourceSpans":null}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}},{"key":"gen_ai.prompt.0.content","value":{"doubleValue":"Infinity"}}]}]}]}]}`,
		`{"resource_spans":[{"scope_spans":[{"spans":[{"trace_id":"5B8EFFF798038103D269B633813FC60C","span_id":"eee19b7ec3c1b174","events":[{"name":"gen_ai.content.prompt","attributes":[{"key":"gen_ai.prompt","value":{"bytesValue":"AAE="}}]}],"attributes":[{"key":"gen_ai.operation.name","value":{"intValue":"7"}}]}]}]}]}`,
	} {
		f.Add([]byte(s))
	}
	o := &Options{Tags: DefaultTags}
	f.Fuzz(func(t *testing.T, b []byte) {
		for s, re := range o.samples(b) {
			if re != nil {
				if re.Err == nil {
					t.Fatalf("RowError without an error: %+v", re)
				}
				return
			}
			if err := dataset.CheckID(s.ID); err != nil {
				t.Fatal(err)
			}
			if !json.Valid(s.Input.Input) {
				t.Fatalf("input is not JSON: %q", s.Input.Input)
			}
			if s.Input.Output != nil && !json.Valid(s.Input.Output) {
				t.Fatalf("output is not JSON: %q", s.Input.Output)
			}
			if _, err := json.Marshal(s.Input); err != nil {
				t.Fatalf("the case does not marshal: %v", err)
			}
		}
	})
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		if i > 0 {
			out = append(out, b[:i])
		}
		if i == len(b) {
			break
		}
		b = b[i+1:]
	}
	return out
}
