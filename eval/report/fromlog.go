package report

import (
	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/internal/recordjson"
	"github.com/proctor-evals/proctor/internal/safeopen"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// FromLog builds the report of the log at path: FromRecords(
// jsonl.Records(path), opts), the same report, made faster. It reads with
// recordjson.Fold, as the viewer does: every core decodes whole lines,
// leaving out what a report never reads (input, output, scores, and the
// tags of a sample already seen) and copying no string the fold does not
// keep, and the records are folded in file order. A log that is not whole
// (a torn tail, a corrupt line, not a log at all) is read by FromRecords,
// which says what it is.
func FromLog(path string, opts *Options) (*Report, error) {
	rep, err := fromLog(path, opts)
	if err == nil {
		rep.AddManifest(path)
	}
	return rep, err
}

// AddManifest sets what r takes from the manifest of the log at path
// (its sandbox resources, versions and eliminations), if it has one.
func (r *Report) AddManifest(path string) {
	if m, err := manifest.Read(path); err == nil {
		r.Resources, r.ImageDigests = m.Resources, m.ImageDigests
		r.AddVersions(m)
		if r.Leaderboard != nil {
			r.Leaderboard.AddEliminations(m.Eliminations)
			for _, v := range r.Leaderboard.reports {
				v.Resources, v.ImageDigests = m.Resources, m.ImageDigests
			}
		}
	}
}

// AddVersions sets r's Versions from the manifest m, and each variant's
// report's, with the variant's harness version: AddManifest's part for a
// manifest already read (FromRecords of a log whose manifest is at hand).
// Compare takes two runs under the same versions as runs of one agent.
func (r *Report) AddVersions(m *manifest.Manifest) {
	r.Versions = m.Versions
	if r.Leaderboard == nil {
		return
	}
	for _, mv := range m.Variants {
		if v := r.Leaderboard.reports[mv.Name]; v != nil {
			v.Versions = m.Versions
			v.Versions.Harness = mv.Harness
		}
	}
}

func fromLog(path string, opts *Options) (*Report, error) {
	f, err := safeopen.Open(path)
	if err != nil {
		return FromRecords(jsonl.Records(path), opts) // which says why
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return FromRecords(jsonl.Records(path), opts)
	}
	a := NewAggregator(opts)
	end, _, err := recordjson.Fold(f, emptyFolder{a}, nil, nil)
	if err != nil || end != st.Size() {
		return FromRecords(jsonl.Records(path), opts)
	}
	return a.Final(), nil // a is done: the report takes over its state, uncopied
}

// emptyFolder is an aggregator Fold starts to fill: Fold's table of IDs
// stands for its index, which it then never builds (a million samples'
// map of IDs, and a lookup of each new sample in it).
type emptyFolder struct{ *Aggregator }

// AddNew folds in the first record of a sample the aggregator does not
// hold, and returns the sample's index.
func (f emptyFolder) AddNew(r *sink.Record) int {
	i := f.addSample(r.SampleID, r.Tags)
	f.AddAt(i, r)
	return i
}
