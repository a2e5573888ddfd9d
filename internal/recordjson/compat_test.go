package recordjson

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/proctor-evals/proctor/sink"
)

// TestOldLinesRoundTripByteForByte: lines written before error_source,
// the judge's usage and the models existed (here as the encoder of that
// time wrote them) decode with those fields empty and encode back to the
// same bytes, through the strict decoder and through encoding/json's.
func TestOldLinesRoundTripByteForByte(t *testing.T) {
	t.Parallel()
	for _, line := range []string{
		`{"schema":1,"run_id":"r-1","eval":"qa","sample_id":"s-1","epoch":0,"attempt":0,"status":"pass","score":1,"started_at":"2025-06-01T12:00:00Z","duration_ms":12.5,"input_tokens":100,"output_tokens":20,"cost_usd":0.0042,"seed":7}`,
		`{"schema":1,"run_id":"r-1","eval":"qa","sample_id":"s-2","epoch":1,"attempt":2,"status":"error","score":0,"error":"judge: rubric: openai: HTTP 503","error_kind":"judge","input":{"q":"2+2"},"output":"4","tags":{"k":"v"},"started_at":"2025-06-01T12:00:00.123456789Z","duration_ms":3,"input_tokens":0,"output_tokens":0,"cost_usd":0,"seed":18446744073709551615,"trace":"runs/x.traces.jsonl#0","worker":"h:1","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7"}`,
		`{"schema":1,"run_id":"r-1","eval":"qa","sample_id":"s-3","epoch":0,"attempt":0,"status":"unscored","score":0,"reason":"rubric: no GRADE line","started_at":"2025-06-01T12:00:00Z","duration_ms":1,"input_tokens":5,"output_tokens":6,"cost_usd":null,"seed":0,"parent_run_id":"p","reused_from":"q"}`,
	} {
		var strict sink.Record
		if !strictDecode([]byte(line), &strict) {
			t.Fatalf("the strict decoder rejects an old line: %s", line)
		}
		if strict.ErrorSource != "" || strict.JudgeInputTokens != 0 || strict.JudgeOutputTokens != 0 ||
			strict.JudgeCostUSD != 0 || strict.Model != "" || strict.JudgeModel != "" {
			t.Errorf("an old line decodes with new fields set: %+v", strict)
		}
		var slow sink.Record
		if err := json.Unmarshal([]byte(line), &slow); err != nil {
			t.Fatal(err)
		}
		for _, r := range []sink.Record{strict, slow} {
			want := line
			if bytes.Contains([]byte(line), []byte(`"cost_usd":null`)) {
				want = string(bytes.Replace([]byte(line), []byte(`"cost_usd":null`), []byte(`"cost_usd":0`), 1))
			}
			if got := r.AppendJSON(nil); string(got) != want {
				t.Errorf("an old line re-encodes differently\n got: %s\nwant: %s", got, want)
			}
		}
	}
}
