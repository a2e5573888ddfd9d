package report_test

import (
	"encoding/json"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/stats"
)

// seqOf yields recs as a log would.
func seqOf(recs []sink.Record) func(func(sink.Record, error) bool) {
	return func(yield func(sink.Record, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}
}

// runOf builds records: outcomes[id] is one letter per epoch, P or F.
func runOf(outcomes map[string]string, tags map[string]map[string]string) []sink.Record {
	var recs []sink.Record
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range outcomes {
			if !yield(id) {
				return
			}
		}
	}) {
		for ep, o := range outcomes[id] {
			r := sink.Record{Schema: 1, RunID: "r", Eval: "e", SampleID: id, Epoch: ep, Tags: tags[id], Status: sink.Fail}
			if o == 'P' {
				r.Status, r.Score = sink.Pass, 1
			}
			recs = append(recs, r)
		}
	}
	return recs
}

// requireHonest checks an interval is defined, has width, and holds rate.
func requireHonest(t *testing.T, iv stats.Interval, rate float64) {
	t.Helper()
	require.False(t, math.IsNaN(iv.Lo) || math.IsNaN(iv.Hi), "undefined interval %v", iv)
	require.Greater(t, iv.Width(), 0.0, "zero-width interval %v", iv)
	require.True(t, iv.Contains(rate), "%v does not hold %v", iv, rate)
}

// TestReportJSONWithOneSampleTag: a tag value held by one sample, with
// epochs, made `proctor report -json` fail (json: unsupported value: NaN).
func TestReportJSONWithOneSampleTag(t *testing.T) {
	t.Parallel()
	recs := runOf(map[string]string{"s1": "PPF", "s2": "PFF", "s3": "PPP"},
		map[string]map[string]string{"s1": {"repo": "a"}, "s2": {"repo": "b"}, "s3": {"repo": "b"}})
	rep, err := report.FromRecords(seqOf(recs), &report.Options{Resamples: 100})
	require.NoError(t, err)
	b, err := json.Marshal(rep)
	require.NoError(t, err)

	var got report.Report
	require.NoError(t, json.Unmarshal(b, &got))
	a := got.ByTag[0].Groups[0]
	require.Equal(t, "a", a.Value)
	requireHonest(t, a.Interval, 2.0/3)
	require.Equal(t, report.MethodWilsonOneSample, a.Interval.Method)
	require.Contains(t, rep.String(), report.MethodWilsonOneSample)
}

// TestOneSampleIntervalIsNotACertainty: with one sample the clustered SE
// is undefined (it was NaN), and its cluster bootstrap resamples the one
// sample into a zero-width interval: Wilson over episodes instead, said
// so, and no bootstrap.
func TestOneSampleIntervalIsNotACertainty(t *testing.T) {
	t.Parallel()
	rep, err := report.FromRecords(seqOf(runOf(map[string]string{"only": "PPFPF"}, nil)), nil)
	require.NoError(t, err)
	require.Equal(t, 0.6, rep.PassRate)
	requireHonest(t, rep.Interval, 0.6)
	require.Equal(t, stats.Wilson(3, 5, 0.95).Lo, rep.Interval.Lo)
	require.Equal(t, report.MethodWilsonOneSample, rep.Interval.Method)
	require.Nil(t, rep.Bootstrap)
	require.Contains(t, rep.String(), report.MethodWilsonOneSample)
	_, err = json.Marshal(rep)
	require.NoError(t, err)
}

// TestNoVariationIntervalIsNotACertainty: every sample passing every epoch
// gave a clustered SE of 0 and the interval [100%, 100%].
func TestNoVariationIntervalIsNotACertainty(t *testing.T) {
	t.Parallel()
	rep, err := report.FromRecords(seqOf(runOf(map[string]string{"a": "PPPP", "b": "PPPP", "c": "PPPP"}, nil)), &report.Options{Resamples: -1})
	require.NoError(t, err)
	requireHonest(t, rep.Interval, 1)
	require.Equal(t, stats.Wilson(12, 12, 0.95), stats.Interval{Lo: rep.Interval.Lo, Hi: rep.Interval.Hi, Level: 0.95, Method: stats.MethodWilson})
	require.Equal(t, report.MethodWilsonNoVariation, rep.Interval.Method)

	// With variation, the cluster-robust interval as before.
	rep, err = report.FromRecords(seqOf(runOf(map[string]string{"a": "PPPP", "b": "PFPP", "c": "FFPP"}, nil)), &report.Options{Resamples: -1})
	require.NoError(t, err)
	require.Equal(t, report.MethodClustered, rep.Interval.Method)
}

// TestReportJSONUndefinedIsNull: every float a report holds may be
// undefined (a judge's NaN score, an interval over nothing); JSON holds
// null there instead of failing.
func TestReportJSONUndefinedIsNull(t *testing.T) {
	t.Parallel()
	nan, inf := math.NaN(), math.Inf(1)
	rep := &report.Report{
		PassRate: nan, MeanScore: inf,
		Interval: stats.Interval{Lo: nan, Hi: nan, Level: 0.95},
		PassAtK:  []report.KValue{{K: 1, Value: nan}},
		ByTag:    []report.TagBreakdown{{Tag: "t", Groups: []report.Group{{Value: "v", PassRate: nan, Interval: stats.Interval{Lo: nan, Hi: inf}}}}},
		Latency:  report.Latency{MaxMS: inf},
	}
	rep.Usage.CostUSD = nan
	b, err := json.Marshal(rep)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	require.Nil(t, m["pass_rate"])
	require.Nil(t, m["mean_score"])
	require.Equal(t, map[string]any{"lo": nil, "hi": nil, "level": 0.95}, m["interval"])
	require.Equal(t, []any{map[string]any{"k": 1.0, "value": nil}}, m["pass_at_k"])
	require.Nil(t, m["latency"].(map[string]any)["max_ms"])
	require.Equal(t, map[string]any{"cost_usd": nil}, m["usage"])
	g := m["by_tag"].([]any)[0].(map[string]any)["groups"].([]any)[0].(map[string]any)
	require.Nil(t, g["pass_rate"])
	require.Equal(t, "v", g["value"])

	// The Comparison of reports with nothing paired: undefined throughout.
	c := report.Compare(rep, rep, nil)
	_, err = json.Marshal(c)
	require.NoError(t, err)
}
