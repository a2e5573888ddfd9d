package eval

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
)

// governedModels is a Models with a rate governor, as package gateway's.
type governedModels struct {
	http.Handler
	lanes []RateLimit
}

func (governedModels) OpenEpisode(string, harness.Meter) (map[string]string, func()) {
	return nil, func() {}
}

func (g governedModels) RateLimits(yield func(provider, model string, limit, inFlight, waiting int)) {
	for _, l := range g.lanes {
		yield(l.Provider, l.Model, l.Limit, l.InFlight, l.Waiting)
	}
}

// Progress reads the gateway's governor at each snapshot, and the line
// names its most held lane.
func TestProgressShowsTheRateGovernor(t *testing.T) {
	t.Parallel()
	lanes := []RateLimit{{"openai", "gpt-4o-mini", 12, 12, 3}, {"anthropic", "claude-sonnet-4-5", 8, 8, 30}}
	done := newDoneSet(10)
	agg := report.NewIndexed(nil, 10, func(i int) (string, map[string]string) { return "s", nil })
	r := &run{evalName: "e", start: time.Now(), total: 10, owned: 10, done: done, rec: newRecorder(done, epochsOnly(1), agg, func(err error) { t.Error(err) })}
	r.rec.start(nil)
	tr := newProgressTracker(r, &Config{Models: governedModels{lanes: lanes}})
	p := tr.snapshot(time.Now(), false)
	if diff := cmp.Diff(lanes, p.RateLimits); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	require.Contains(t, p.String(), " · claude-sonnet-4-5 limit 8, 30 waiting")

	idle := p
	idle.RateLimits = []RateLimit{{"openai", "gpt-4o-mini", 16, 0, 0}}
	require.NotContains(t, idle.String(), "limit", "an idle governor is not news")

	none := newProgressTracker(r, &Config{}).snapshot(time.Now(), false)
	require.Nil(t, none.RateLimits)
}
