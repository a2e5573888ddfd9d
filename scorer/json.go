package scorer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/go-cmp/cmp"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
)

// JSON passes when the output and the reference are equal as JSON values:
// both are decoded (objects as maps, so key order and white space do not
// matter; numbers as float64, so 1 and 1.0 are equal) and compared.
//
// The reference want returns is JSON text when it is a json.RawMessage or
// a []byte, and any other Go value is taken as what it marshals to (a
// string is the JSON string, not JSON text). The output is JSON text; a
// single surrounding Markdown code fence (```json … ```) is removed first,
// since models wrap JSON in one. An output that is not JSON fails; a
// reference that is not JSON is an error (the dataset is wrong, not the
// agent). A mismatch fails with a go-cmp diff (-want +got) as the reason.
func JSON[T any](want func(T) any) judge.Judge[T, string] {
	return judge.Func[T, string](func(_ context.Context, ep *harness.Episode[T], got string) (judge.Verdict, error) {
		w, err := referenceJSON(want(ep.Sample.Input))
		if err != nil {
			return judge.Verdict{}, fmt.Errorf("scorer: json: sample %s: reference: %w", ep.Sample.ID, err)
		}
		var g any
		if err := decodeJSON([]byte(stripFence(got)), &g); err != nil {
			return judge.Fail(fmt.Sprintf("json: output is not JSON (%v): %s", err, clip(got))), nil
		}
		if diff := cmp.Diff(w, g); diff != "" {
			return judge.Fail("json: mismatch (-want +got):\n" + clipTail(diff, 2000)), nil
		}
		return judge.Pass(""), nil
	})
}

func referenceJSON(v any) (any, error) {
	var b []byte
	switch x := v.(type) {
	case json.RawMessage:
		b = x
	case []byte:
		b = x
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	var out any
	err := decodeJSON(b, &out)
	return out, err
}

// decodeJSON decodes exactly one JSON value: trailing data is an error.
func decodeJSON(b []byte, v *any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err == nil {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}

// stripFence removes one surrounding Markdown code fence.
func stripFence(s string) string {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "```") || !strings.HasSuffix(t, "```") || len(t) < 6 {
		return s
	}
	t = strings.TrimSuffix(t[3:], "```")
	if i := strings.IndexByte(t, '\n'); i >= 0 && !strings.ContainsAny(t[:i], "{[\"") {
		t = t[i+1:] // the info string: json, JSON…
	}
	return t
}

// clipTail keeps the first n bytes of s, on a rune boundary.
func clipTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "\n…"
}
