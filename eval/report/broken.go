package report

// Broken samples: those whose oracle (a reference solution, eval.Eval's
// Oracle) did not pass its own judge. Their environment or their test is
// broken, not the agent: their episodes are left out of every rate and
// interval, and listed and counted instead.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/proctor-evals/proctor/internal/sidecar"
	"github.com/proctor-evals/proctor/sink"
)

// BrokenSamples reads the report of an oracle's run: the samples it
// failed on every scored epoch are broken; unknown counts those it never
// scored (its episodes errored), which are not known to be.
func BrokenSamples(oracle *Report) (broken map[string]bool, unknown int) {
	broken = map[string]bool{}
	for _, s := range oracle.SampleResults() {
		switch {
		case s.Scored() == 0:
			unknown++
		case s.Passed == 0:
			broken[s.ID] = true
		}
	}
	return broken, unknown
}

// OracleBroken returns the broken samples of the run logged at log, from
// its oracle's log beside it (eval.Config.Oracle); nil when it has none.
func OracleBroken(log string) (map[string]bool, error) {
	path := sidecar.Oracle(log)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	rep, err := FromLog(path, &Options{Resamples: -1})
	if err != nil {
		return nil, fmt.Errorf("report: the oracle's log: %w", err)
	}
	broken, _ := BrokenSamples(rep)
	return broken, nil
}

// brokenSamples tracks the records of broken samples an aggregator left
// out.
type brokenSamples struct {
	seen     map[string]bool
	episodes int
}

// skip reports whether r is a broken sample's record, counting it.
func (a *Aggregator) skipBroken(r *sink.Record) bool {
	if len(a.opts.Broken) == 0 || !a.opts.Broken[r.SampleID] {
		return false
	}
	b := &a.broken
	if b.seen == nil {
		b.seen = map[string]bool{}
	}
	b.seen[strings.Clone(r.SampleID)] = true
	b.episodes++
	return true
}

func (b *brokenSamples) ids() []string {
	if len(b.seen) == 0 {
		return nil
	}
	ids := make([]string, 0, len(b.seen))
	for id := range b.seen {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// brokenLine says what the headline left out, or "".
func (r *Report) brokenLine() string {
	if len(r.Broken) == 0 {
		return ""
	}
	return fmt.Sprintf("%d broken samples (their oracle failed: %d episodes) excluded from the pass rate: %s",
		len(r.Broken), r.BrokenEpisodes, listIDs(r.Broken, 10))
}

// listIDs lists at most n IDs, saying how many more.
func listIDs(ids []string, n int) string {
	if len(ids) <= n {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:n], ", "), len(ids)-n)
}
