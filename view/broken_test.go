package view_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/view"
)

// The run page leaves out the samples whose oracle failed (the oracle's
// log beside the run's), as `proctor report` does: the headline says so,
// they are listed apart from the failures, and the noise floor of a run
// of several epochs is in the summary.
func TestRunPageShowsBrokenSamplesAndTheNoiseFloor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	lines := func(recs ...sink.Record) []byte {
		var b []byte
		for _, r := range recs {
			b = append(r.AppendJSON(b), '\n')
		}
		return b
	}
	rec := func(id string, epoch int, pass bool) sink.Record {
		st := sink.Fail
		if pass {
			st = sink.Pass
		}
		return sink.Record{Schema: sink.SchemaVersion, RunID: "r", Eval: "e", SampleID: id, Epoch: epoch, Status: st}
	}
	var recs, oracle []sink.Record
	for _, id := range []string{"hard", "easy", "mixed", "broken"} {
		for ep := range 2 {
			recs = append(recs, rec(id, ep, id == "easy" || id == "mixed" && ep == 0))
		}
		oracle = append(oracle, rec(id, 0, id != "broken"))
	}
	if err := os.WriteFile(log, lines(recs...), 0o644); err != nil {
		t.Fatal(err)
	}
	var without strings.Builder
	if err := view.WriteHTML(&without, log, &view.Options{Report: &report.Options{Resamples: -1}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(without.String(), `id="broken"`) {
		t.Fatal("broken samples listed with no oracle's log")
	}
	if err := os.WriteFile(filepath.Join(dir, "run.oracle.jsonl"), lines(oracle...), 0o644); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := view.WriteHTML(&b, log, &view.Options{Report: &report.Options{Resamples: -1}}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		`id="headline">`, "1 broken samples (their oracle failed: 2 episodes) excluded from the pass rate: broken",
		`<table class="broken" id="broken">`, ">broken</",
		`id="m-noise-floor"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the run page lacks %q", want)
		}
	}
	if i := strings.Index(page, `id="failures"`); i >= 0 && strings.Contains(page[i:], ">broken<") {
		t.Error("a broken sample is listed among the failures")
	}
}
