package cluster

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// TestVariantMatrixDistributed: a matrix of variants run by a coordinator
// and two workers logs what one process logs, record for record (every
// (variant, sample, epoch) once, with the same outcome, seed and output);
// each sample's environment is provisioned once for all its variants,
// whichever worker runs it; and a resume that selects variants
// (Config.Variants) runs only theirs.
func TestVariantMatrixDistributed(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 10, Matrix: 3, Sleep: 5 * time.Millisecond}
	if _, err := exec.LookPath("sh"); err == nil {
		s.Sandbox = t.TempDir()
	} else {
		t.Log("sh is not on PATH: the matrix runs without sandboxes")
	}
	log := t.TempDir() + "/run.jsonl"
	cfg := s.config(runConfig(log))
	cfg.Variants = []string{"m0", "m2"}
	c, out := coordinate(t, s, cfg, coordinatorOptions())
	w1 := start(t, s, workerArgs(c, 4)...)
	w2 := start(t, s, workerArgs(c, 4)...)
	finish(t, out, w1, w2)
	for _, r := range records(t, log) {
		if r.Variant == "m1" {
			t.Fatalf("variant m1 ran, though Config.Variants names m0 and m2")
		}
	}

	cfg.Variants = nil // the resume runs m1's episodes
	c, out = coordinate(t, s, cfg, coordinatorOptions())
	w1 = start(t, s, workerArgs(c, 4)...)
	w2 = start(t, s, workerArgs(c, 4)...)
	res := finish(t, out, w1, w2)
	if res.rep.Episodes != s.Samples*testEpochs*s.Matrix {
		t.Errorf("%d episodes reported, want %d", res.rep.Episodes, s.Samples*testEpochs*s.Matrix)
	}
	if s.Sandbox != "" {
		// Two runs (the selection, then its resume): a sample is
		// provisioned once in each, never once per variant.
		if n := logLines(filepath.Join(s.Sandbox, "provisions")); n != 2*s.Samples {
			t.Errorf("%d environments provisioned for %d samples in two runs", n, s.Samples)
		}
	}

	base := s
	if s.Sandbox != "" {
		base.Sandbox = t.TempDir()
	}
	baseLog := t.TempDir() + "/base.jsonl"
	want, err := testEval(base).Run(context.Background(), base.config(runConfig(baseLog)))
	if err != nil {
		t.Fatal(err)
	}
	sameReport(t, want, res.rep)
	got, wantRecs := byKey(t, log), byKey(t, baseLog)
	if len(wantRecs) != s.Samples*testEpochs*s.Matrix {
		t.Fatalf("one process logged %d episodes, want %d", len(wantRecs), s.Samples*testEpochs*s.Matrix)
	}
	ignore := cmpopts.IgnoreFields(sink.Record{}, "RunID", "StartedAt", "DurationMS", "Worker", "Transcript")
	if d := cmp.Diff(wantRecs, got, ignore); d != "" {
		t.Errorf("the distributed matrix's records differ from one process's (-want +got):\n%s", d)
	}
}

func records(t *testing.T, log string) []sink.Record {
	t.Helper()
	var out []sink.Record
	for r, err := range jsonl.Records(log) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// byKey is a log's records by their key, each key once.
func byKey(t *testing.T, log string) map[sink.Key]sink.Record {
	t.Helper()
	m := map[sink.Key]sink.Record{}
	for _, r := range records(t, log) {
		if _, dup := m[r.Key()]; dup {
			t.Errorf("%v logged twice", r.Key())
		}
		m[r.Key()] = r
	}
	return m
}

// TestWorkerWithOtherVariantsIsRefused: a worker compares its eval's
// variants (names and versions) with the run's: slots number variants by
// their place, so another list would run other episodes under the same
// slots.
func TestWorkerWithOtherVariantsIsRefused(t *testing.T) {
	t.Parallel()
	run := &manifest.Manifest{Eval: "e", Variants: []manifest.Variant{{Name: "a", Harness: "1"}, {Name: "b", Harness: "1"}}}
	for name, mine := range map[string][]manifest.Variant{
		"reordered": {{Name: "b", Harness: "1"}, {Name: "a", Harness: "1"}},
		"versioned": {{Name: "a", Harness: "1"}, {Name: "b", Harness: "2"}},
		"fewer":     {{Name: "a", Harness: "1"}},
		"none":      nil,
	} {
		d := compareManifests(run, &manifest.Manifest{Eval: "e", Variants: mine})
		if len(d) != 1 || !strings.HasPrefix(d[0], "variants: ") {
			t.Errorf("%s: differences %q, want the variants'", name, d)
		}
	}
	if d := compareManifests(run, &manifest.Manifest{Eval: "e", Variants: run.Variants}); len(d) != 0 {
		t.Errorf("the same variants differ: %q", d)
	}
}
