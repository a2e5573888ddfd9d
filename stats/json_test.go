package stats_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/stats"
)

// TestJSONShape: snake_case names, and undefined statistics (NaN, ±Inf)
// as null rather than an error (encoding/json refuses NaN).
func TestJSONShape(t *testing.T) {
	t.Parallel()
	nan := math.NaN()
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"interval", stats.Interval{Lo: 0.25, Hi: 0.75, Level: 0.95, Method: stats.MethodWilson},
			`{"lo":0.25,"hi":0.75,"level":0.95,"method":"wilson"}`},
		{"undefined interval", stats.Interval{Lo: nan, Hi: math.Inf(1), Level: 0.9},
			`{"lo":null,"hi":null,"level":0.9}`},
		{"one pair", stats.Paired([]float64{1}, []float64{0}, 0.95),
			`{"mean":-1,"se":null,"lo":null,"hi":null,"level":0.95,"p":null,"correlation":null,"n":1,"mean_base":1,"mean_head":0}`},
		{"float", []stats.Float{1.5, stats.Float(nan), stats.Float(math.Inf(-1))}, `[1.5,null,null]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.v)
			require.NoError(t, err)
			require.JSONEq(t, tc.want, string(b))
		})
	}
}

func TestJSONRoundTrip(t *testing.T) {
	t.Parallel()
	d := stats.Paired([]float64{1, 0, 1, 1}, []float64{1, 1, 0, 1}, 0.9)
	one := stats.Paired([]float64{1}, []float64{0}, 0.95)
	iv := stats.Interval{Lo: math.NaN(), Hi: 0.5, Level: 0.95, Method: "x"}
	for _, v := range []any{&d, &one, &iv} {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		switch v := v.(type) {
		case *stats.Difference:
			var got stats.Difference
			require.NoError(t, json.Unmarshal(b, &got))
			require.Empty(t, cmp.Diff(*v, got, cmpopts.EquateNaNs()))
		case *stats.Interval:
			var got stats.Interval
			require.NoError(t, json.Unmarshal(b, &got))
			require.Empty(t, cmp.Diff(*v, got, cmpopts.EquateNaNs()))
		}
	}
}

// FuzzIntervalJSON: any input either fails to decode or decodes to an
// interval that marshals and decodes back to itself.
func FuzzIntervalJSON(f *testing.F) {
	for _, s := range []string{`{"lo":0.1,"hi":0.9,"level":0.95,"method":"wilson"}`, `{"lo":null,"hi":null}`, `null`, `{"lo":"x"}`, `[]`, `{"lo":1e400}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var iv stats.Interval
		if json.Unmarshal(b, &iv) != nil {
			return
		}
		out, err := json.Marshal(iv)
		if err != nil {
			t.Fatalf("marshal %+v: %v", iv, err)
		}
		var back stats.Interval
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("unmarshal %s: %v", out, err)
		}
		if d := cmp.Diff(iv, back, cmpopts.EquateNaNs()); d != "" {
			t.Fatalf("round trip of %s (-first +second):\n%s", b, d)
		}
	})
}

// FuzzDifferenceJSON is FuzzIntervalJSON for a Difference.
func FuzzDifferenceJSON(f *testing.F) {
	for _, s := range []string{`{"mean":-1,"se":null,"lo":null,"hi":null,"level":0.95,"p":null,"correlation":null,"n":1,"mean_base":1,"mean_head":0}`, `{}`, `{"n":-3,"p":2}`, `{"n":1.5}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var d stats.Difference
		if json.Unmarshal(b, &d) != nil {
			return
		}
		out, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("marshal %+v: %v", d, err)
		}
		var back stats.Difference
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("unmarshal %s: %v", out, err)
		}
		if diff := cmp.Diff(d, back, cmpopts.EquateNaNs()); diff != "" {
			t.Fatalf("round trip of %s (-first +second):\n%s", b, diff)
		}
	})
}
