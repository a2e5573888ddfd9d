package atif_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/harness/atif"
)

// FuzzDecode: any document either fails to decode or imports, exports
// and imports again to the same events.
func FuzzDecode(f *testing.F) {
	data, err := os.ReadFile("testdata/rfc-example.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`{"schema_version":"ATIF-v1.4","session_id":"s","agent":{"name":"a","version":"1"},"steps":[{"step_id":1,"source":"agent","message":"","extra":{"proctor":{"kind":"command"}}}]}`))
	f.Add([]byte(`{"schema_version":"ATIF-v1.0","session_id":"","agent":{"name":"","version":""},"steps":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := atif.Decode(data)
		if err != nil {
			return
		}
		evs, err := atif.Events(tr)
		if err != nil {
			return
		}
		out, err := atif.Export(&harness.Transcript{Events: evs})
		if err != nil {
			t.Fatalf("Export: %v", err)
		}
		b, err := json.Marshal(out)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		again, err := atif.Decode(b)
		if err != nil {
			t.Fatalf("Export wrote what Decode refuses: %v\n%s", err, b)
		}
		evs2, err := atif.Events(again)
		if err != nil {
			t.Fatalf("Events: %v", err)
		}
		if diff := cmp.Diff(evs, evs2); diff != "" {
			t.Fatalf("Events ∘ Export is not the identity (-first +second):\n%s", diff)
		}
	})
}
