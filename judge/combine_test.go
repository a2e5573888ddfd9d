package judge_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
)

type J = judge.Judge[string, string]

// fixed returns a judge that always answers v, err and counts its calls.
func fixed(v judge.Verdict, err error, calls *atomic.Int32) J {
	return judge.Func[string, string](func(context.Context, *harness.Episode[string], string) (judge.Verdict, error) {
		if calls != nil {
			calls.Add(1)
		}
		return v, err
	})
}

var (
	pass     = judge.Verdict{Pass: true, Score: 1, Reason: "ok"}
	fail     = judge.Verdict{Score: 0, Reason: "wrong"}
	partial  = judge.Verdict{Score: 0.5, Reason: "half"}
	unscored = judge.Unscored("cannot tell")
	errBoom  = errors.New("grader down")
)

func ep(seed uint64) *harness.Episode[string] {
	return &harness.Episode[string]{Sample: dataset.Sample[string]{ID: "s", Input: "q"}, Seed: seed}
}

type outcome int

const (
	oPass outcome = iota
	oFail
	oUnscored
	oError
)

func classify(t *testing.T, v judge.Verdict, err error) outcome {
	t.Helper()
	switch {
	case err == nil && v.Pass:
		return oPass
	case err == nil:
		return oFail
	case errors.Is(err, judge.ErrUnscored):
		return oUnscored
	}
	return oError
}

func TestAllAny(t *testing.T) {
	t.Parallel()
	type sub struct {
		v   judge.Verdict
		err error
	}
	tests := []struct {
		name      string
		subs      []sub
		all, any  outcome
		allCalls  int32 // judges All calls (short-circuit)
		anyCalls  int32
		allReason string
	}{
		{"all pass", []sub{{pass, nil}, {pass, nil}}, oPass, oPass, 2, 1, "ok; ok"},
		{"first fails: All stops, Any goes on", []sub{{fail, nil}, {pass, nil}}, oFail, oPass, 1, 2, "wrong"},
		{"last fails", []sub{{pass, nil}, {fail, nil}}, oFail, oPass, 2, 1, "wrong"},
		{"all fail", []sub{{fail, nil}, {fail, nil}}, oFail, oFail, 1, 2, "wrong"},
		{"unscored then fail: fail dominates in All", []sub{{judge.Verdict{}, unscored}, {fail, nil}}, oFail, oUnscored, 2, 2, "wrong"},
		{"unscored then pass: pass dominates in Any", []sub{{judge.Verdict{}, unscored}, {pass, nil}}, oUnscored, oPass, 2, 2, ""},
		{"error stops both", []sub{{judge.Verdict{}, errBoom}, {pass, nil}}, oError, oError, 1, 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var allCalls, anyCalls atomic.Int32
			var forAll, forAny []J
			for _, s := range tt.subs {
				forAll = append(forAll, fixed(s.v, s.err, &allCalls))
				forAny = append(forAny, fixed(s.v, s.err, &anyCalls))
			}
			v, err := judge.All(forAll...).Judge(context.Background(), ep(1), "")
			require.Equal(t, tt.all, classify(t, v, err), "All: %+v %v", v, err)
			require.Equal(t, tt.allCalls, allCalls.Load(), "All calls")
			if err == nil {
				require.Equal(t, tt.allReason, v.Reason)
			}
			v, err = judge.Any(forAny...).Judge(context.Background(), ep(1), "")
			require.Equal(t, tt.any, classify(t, v, err), "Any: %+v %v", v, err)
			require.Equal(t, tt.anyCalls, anyCalls.Load(), "Any calls")
		})
	}
}

func TestAllAnyScores(t *testing.T) {
	t.Parallel()
	a := judge.Verdict{Pass: true, Score: 0.7, Scores: map[string]float64{"x": 1}}
	b := judge.Verdict{Pass: true, Score: 0.9, Scores: map[string]float64{"y": 2}, Weight: 4}
	v, err := judge.All(fixed(a, nil, nil), fixed(b, nil, nil)).Judge(context.Background(), ep(1), "")
	require.NoError(t, err)
	require.Equal(t, 0.7, v.Score)
	require.Equal(t, map[string]float64{"x": 1, "y": 2}, v.Scores)
	require.Equal(t, 4.0, v.Weight, "weights multiply")
	v, err = judge.Any(fixed(fail, nil, nil), fixed(partial, nil, nil)).Judge(context.Background(), ep(1), "")
	require.NoError(t, err)
	require.False(t, v.Pass)
	require.Equal(t, 0.5, v.Score)
	require.Equal(t, "wrong; half", v.Reason)
}

func TestWeighted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		threshold float64
		subs      []judge.Criterion[string, string]
		want      outcome
		score     float64
	}{
		{"weighted mean passes", 0.6, []judge.Criterion[string, string]{
			{Name: "correct", Weight: 3, Judge: fixed(pass, nil, nil)},
			{Name: "style", Weight: 1, Judge: fixed(fail, nil, nil)},
		}, oPass, 0.75},
		{"weighted mean below threshold", 0.8, []judge.Criterion[string, string]{
			{Name: "correct", Weight: 3, Judge: fixed(pass, nil, nil)},
			{Name: "style", Weight: 1, Judge: fixed(fail, nil, nil)},
		}, oFail, 0.75},
		{"partial credit", 0.5, []judge.Criterion[string, string]{
			{Name: "a", Weight: 1, Judge: fixed(partial, nil, nil)},
			{Name: "b", Weight: 1, Judge: fixed(partial, nil, nil)},
		}, oPass, 0.5},
		{"unscored part makes it unscored", 0.5, []judge.Criterion[string, string]{
			{Name: "a", Weight: 1, Judge: fixed(pass, nil, nil)},
			{Name: "b", Weight: 1, Judge: fixed(judge.Verdict{}, unscored, nil)},
		}, oUnscored, 0},
		{"error", 0.5, []judge.Criterion[string, string]{
			{Name: "a", Weight: 1, Judge: fixed(judge.Verdict{}, errBoom, nil)},
		}, oError, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, err := judge.Weighted(tt.threshold, tt.subs...).Judge(context.Background(), ep(1), "")
			require.Equal(t, tt.want, classify(t, v, err), "%+v %v", v, err)
			if err == nil {
				require.InDelta(t, tt.score, v.Score, 1e-12)
				for _, c := range tt.subs {
					require.Contains(t, v.Scores, c.Name)
				}
			}
		})
	}
	require.Panics(t, func() {
		judge.Weighted[string, string](0.5, judge.Criterion[string, string]{Name: "a", Judge: fixed(pass, nil, nil)})
	})
}

func TestCascade(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		cheap     judge.Verdict
		cheapErr  error
		settle    judge.Settle
		want      outcome
		expensive int32
		escalated float64
	}{
		{"cheap pass settles", pass, nil, judge.PassSettles, oPass, 0, 0},
		{"cheap fail escalates", fail, nil, judge.PassSettles, oFail, 1, 1},
		{"gate failure settles", fail, nil, judge.FailSettles, oFail, 0, 0},
		{"gate pass escalates", pass, nil, judge.FailSettles, oFail, 1, 1},
		{"cheap unscored escalates", judge.Verdict{}, unscored, judge.PassSettles, oFail, 1, 1},
		{"cheap error stops", judge.Verdict{}, errBoom, judge.PassSettles, oError, 0, 0},
		{"never settles", pass, nil, judge.NeverSettles, oFail, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			expensive := fixed(judge.Verdict{Reason: "model says no", Scores: map[string]float64{"grade": 0}}, nil, &calls)
			v, err := judge.Cascade(fixed(tt.cheap, tt.cheapErr, nil), expensive, tt.settle).Judge(context.Background(), ep(1), "")
			require.Equal(t, tt.want, classify(t, v, err), "%+v %v", v, err)
			require.Equal(t, tt.expensive, calls.Load())
			if err == nil {
				require.Equal(t, tt.escalated, v.Scores["escalated"])
			}
		})
	}
}

func TestVote(t *testing.T) {
	t.Parallel()
	// seq answers the i-th call with the i-th verdict (calls are concurrent,
	// so the order of assignment is arbitrary but the multiset is fixed).
	seq := func(vs ...any) J {
		var i atomic.Int32
		return judge.Func[string, string](func(context.Context, *harness.Episode[string], string) (judge.Verdict, error) {
			switch x := vs[int(i.Add(1)-1)%len(vs)].(type) {
			case judge.Verdict:
				return x, nil
			case error:
				return judge.Verdict{}, x
			}
			panic("bad")
		})
	}
	tests := []struct {
		name      string
		n         int
		js        []J
		want      outcome
		agreement float64
	}{
		{"unanimous pass, one judge three times", 3, []J{seq(pass)}, oPass, 1},
		{"two of three pass", 3, []J{seq(pass, fail, pass)}, oPass, 2.0 / 3},
		{"two of three fail, three judges", 1, []J{fixed(fail, nil, nil), fixed(pass, nil, nil), fixed(fail, nil, nil)}, oFail, 2.0 / 3},
		{"abstentions do not count", 3, []J{seq(pass, unscored, fail, pass, pass)}, oPass, 0.75},
		{"tie is unscored", 2, []J{seq(pass, fail)}, oUnscored, 0},
		{"all abstain", 3, []J{seq(unscored)}, oUnscored, 0},
		{"error", 3, []J{seq(pass, errBoom, pass)}, oError, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n := tt.n
			if tt.name == "abstentions do not count" {
				n = 5
			}
			v, err := judge.Vote(n, tt.js...).Judge(context.Background(), ep(1), "")
			require.Equal(t, tt.want, classify(t, v, err), "%+v %v", v, err)
			if err == nil {
				require.InDelta(t, tt.agreement, v.Scores["agreement"], 1e-12)
			}
		})
	}
}

// A combinator given nothing to combine fails alike on every try: the
// error is permanent, so neither Retry nor the engine repeats it.
func TestEmptyCombinatorsArePermanent(t *testing.T) {
	t.Parallel()
	for name, j := range map[string]J{
		"all":      judge.All[string, string](),
		"any":      judge.Any[string, string](),
		"weighted": judge.Weighted[string, string](0.5),
		"vote":     judge.Vote[string, string](3),
	} {
		_, err := j.Judge(context.Background(), ep(1), "")
		var p interface{ Permanent() bool }
		require.True(t, errors.As(err, &p) && p.Permanent(), "%s: %v", name, err)
	}
}
