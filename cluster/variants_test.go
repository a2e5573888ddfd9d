package cluster

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
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

// gateOfVariant is the sequential gate a report decided for a variant.
func gateOfVariant(t *testing.T, rep *report.Report, name string) report.SequentialResult {
	t.Helper()
	v := rep.VariantReport(name)
	if v == nil || v.Sequential == nil {
		t.Fatalf("the report has no gate for variant %s", name)
	}
	return *v.Sequential
}

// sameGates fails unless got decided every variant's gate as want did:
// the same decision, after the same samples (claim position), with the
// same bounds.
func sameGates(t *testing.T, want, got *report.Report, names ...string) {
	t.Helper()
	for _, name := range names {
		w, g := gateOfVariant(t, want, name), gateOfVariant(t, got, name)
		if w.Decision != g.Decision || w.Samples != g.Samples || w.Bounds != g.Bounds {
			t.Errorf("variant %s: distributed %+v\none process %+v", name, g, w)
		}
	}
}

// reportOfLog is the report proctor report makes of a log: its gate
// from the log's manifest.
func reportOfLog(t *testing.T, log string) *report.Report {
	t.Helper()
	m, err := manifest.Read(log)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := report.SequentialOf(m)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := report.FromLog(log, &report.Options{Sequential: seq})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestSequentialPerVariantDistributed: a distributed run of three
// variants with a sequential gate decides each variant's gate as one
// process does (the same decision at the same claim position, with the
// same bounds), stops running the variants that decided (their episodes
// are not all run) and ends once the one left has run every sample.
// Before, a coordinator refused Config.Sequential with variants.
func TestSequentialPerVariantDistributed(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 120, Matrix: 3, Sleep: 5 * time.Millisecond}
	gate := &report.Sequential{Bar: 0.6}
	one := runConfig(t.TempDir() + "/one.jsonl")
	one.Sequential = gate
	want, err := testEval(s).Run(t.Context(), one)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"m0", "m1", "m2"}
	if g := gateOfVariant(t, want, "m0"); g.Decision != report.DecidedPass {
		t.Fatalf("one process, m0: %+v", g)
	}
	if g := gateOfVariant(t, want, "m2"); g.Decision != report.DecidedFail {
		t.Fatalf("one process, m2: %+v", g)
	}
	if g := gateOfVariant(t, want, "m1"); g.Decision != report.Undecided {
		t.Fatalf("one process, m1: %+v", g)
	}

	log := t.TempDir() + "/run.jsonl"
	cfg := runConfig(log)
	cfg.Sequential = gate
	c, out := coordinate(t, s, cfg, coordinatorOptions())
	w1 := start(t, s, workerArgs(c, 4)...)
	w2 := start(t, s, workerArgs(c, 4)...)
	res := finish(t, out, w1, w2)
	sameGates(t, want, res.rep, names...)
	sameGates(t, want, reportOfLog(t, log), names...)
	perVariant := map[string]int{}
	for _, r := range records(t, log) {
		perVariant[r.Variant]++
	}
	if perVariant["m1"] != s.Samples*testEpochs {
		t.Errorf("m1, undecided, has %d records, want every one of %d", perVariant["m1"], s.Samples*testEpochs)
	}
	if perVariant["m0"]+perVariant["m2"] >= 2*s.Samples*testEpochs {
		t.Errorf("the decided variants ran every episode: %v", perVariant)
	}
	t.Logf("records per variant: %v (one process: %d episodes)", perVariant, want.Episodes)
}

// TestSequentialPerVariantCoordinatorRestarted: a coordinator of a run of
// variants gated per variant, SIGKILLed mid-run (after a variant decided)
// and started again on its log, resumes to the decisions of one process:
// each variant's gate at the same claim position with the same bounds,
// and the variant decided before the kill does not run all its samples
// after the restart.
func TestSequentialPerVariantCoordinatorRestarted(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 120, Matrix: 3, Sleep: 40 * time.Millisecond}
	names := []string{"m0", "m1", "m2"}
	gate := &report.Sequential{Bar: 0.6}
	fast := s
	fast.Sleep = 0 // outcomes depend on the seed alone
	one := runConfig(t.TempDir() + "/one.jsonl")
	one.Sequential = gate
	want, err := testEval(fast).Run(t.Context(), one)
	if err != nil {
		t.Fatal(err)
	}
	m0 := gateOfVariant(t, want, "m0")

	dir := t.TempDir()
	log := dir + "/run.jsonl"
	coord, join := restartable(t, log, "-sequential", "0.6")
	first := start(t, s, coord...)
	w1 := start(t, s, join...)
	w2 := start(t, s, join...)
	// m0 has decided once the log holds its claim-order prefix: every
	// variant's records past its decision.
	until(t, 30*time.Second, "m0's decision", func() bool {
		return logLines(log) >= (m0.Samples+12)*testEpochs*len(names)
	})
	first.signal(t, syscall.SIGKILL)
	first.wait(t, 5*time.Second)
	before := map[string]int{}
	for _, r := range records(t, log) {
		before[r.Variant]++
	}
	if before["m1"] >= s.Samples*testEpochs {
		t.Fatalf("the run had finished before the kill: %v", before)
	}
	second := start(t, s, coord...)
	awaitRestarted(t, second, true, w1, w2) // exit 1: not every variant's gate passed
	var rep report.Report
	if err := json.Unmarshal([]byte(second.stdout.String()), &rep); err != nil {
		t.Fatalf("the coordinator's report: %v\n%s", err, second.stdout)
	}
	sameGates(t, want, reportOfLog(t, log), names...)
	after := map[string]int{}
	for k := range byKey(t, log) {
		after[k.Variant]++
	}
	if after["m1"] != s.Samples*testEpochs {
		t.Errorf("m1, undecided, has %d records, want %d", after["m1"], s.Samples*testEpochs)
	}
	if after["m0"] >= s.Samples*testEpochs {
		t.Errorf("m0, decided before the kill, ran every episode after the restart: %v", after)
	}
	t.Logf("records per variant at the kill %v, at the end %v; m0 decided after %d samples", before, after, m0.Samples)
}

// TestEliminationDistributed: a distributed run of three variants that
// eliminates losers (with and without a gate per variant) makes one
// process's eliminations (each variant, by whom, after as many samples)
// and gate decisions, and does not run an eliminated variant's every
// episode. Before, a coordinator refused Config.EliminateVariants.
func TestEliminationDistributed(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 120, Matrix: 3, Sleep: 5 * time.Millisecond}
	names := []string{"m0", "m1", "m2"}
	for _, gated := range []bool{false, true} {
		t.Run(map[bool]string{false: "alone", true: "with gates"}[gated], func(t *testing.T) {
			cfgOf := func(log string) eval.Config {
				cfg := runConfig(log)
				cfg.EliminateVariants = 0.05
				if gated {
					cfg.Sequential = &report.Sequential{Bar: 0.6, Alpha: 0.01}
				}
				return cfg
			}
			want, wantM := eliminatedInOneProcess(t, s, cfgOf(t.TempDir()+"/one.jsonl"))

			log := t.TempDir() + "/run.jsonl"
			c, out := coordinate(t, s, cfgOf(log), coordinatorOptions())
			w1 := start(t, s, workerArgs(c, 4)...)
			w2 := start(t, s, workerArgs(c, 4)...)
			res := finish(t, out, w1, w2)
			gotM, err := manifest.Read(log)
			if err != nil {
				t.Fatal(err)
			}
			sameEliminations(t, "the distributed", wantM, gotM)
			if gated {
				for _, name := range names {
					w, g := gateOfVariant(t, want, name), gateOfVariant(t, res.rep, name)
					if w.Decision != g.Decision {
						t.Errorf("variant %s: distributed %+v\none process %+v", name, g, w)
					}
				}
			}
			perVariant := map[string]int{}
			for k := range byKey(t, log) {
				perVariant[k.Variant]++
			}
			for _, e := range gotM.Eliminations {
				if perVariant[e.Variant] >= s.Samples*testEpochs {
					t.Errorf("eliminated variant %s ran every episode: %v", e.Variant, perVariant)
				}
			}
			t.Logf("eliminations %+v; records per variant %v (one process: %d episodes)", gotM.Eliminations, perVariant, want.Episodes)
		})
	}
}

// TestEliminationCoordinatorRestarted: a coordinator that eliminates
// variants, SIGKILLed after its first elimination (which its manifest
// then lacks) and started again on its log, makes one process's
// eliminations: the tests are fed again from the log, in claim order.
func TestEliminationCoordinatorRestarted(t *testing.T) {
	t.Parallel()
	s := shape{Samples: 120, Matrix: 3, Sleep: 40 * time.Millisecond}
	fast := s
	fast.Sleep = 0 // outcomes depend on the seed alone
	one := runConfig(t.TempDir() + "/one.jsonl")
	one.EliminateVariants = 0.05
	_, wantM := eliminatedInOneProcess(t, fast, one)
	first := wantM.Eliminations[0]

	log := t.TempDir() + "/run.jsonl"
	coord, join := restartable(t, log, "-eliminate-variants", "0.05")
	c1 := start(t, s, coord...)
	w1 := start(t, s, join...)
	w2 := start(t, s, join...)
	until(t, 30*time.Second, "the first elimination", func() bool {
		return logLines(log) >= (first.AfterSamples+12)*testEpochs*3
	})
	c1.signal(t, syscall.SIGKILL)
	c1.wait(t, 5*time.Second)
	before := map[string]int{}
	for _, r := range records(t, log) {
		before[r.Variant]++
	}
	if before["m0"] >= s.Samples*testEpochs { // the winner runs every sample
		t.Fatalf("the run had finished before the kill: %v", before)
	}
	c2 := start(t, s, coord...)
	awaitRestarted(t, c2, true, w1, w2)
	gotM, err := manifest.Read(log)
	if err != nil {
		t.Fatal(err)
	}
	sameEliminations(t, "the restarted run's", wantM, gotM)
	t.Logf("records per variant at the kill %v; eliminations %+v", before, gotM.Eliminations)
	byKey(t, log) // each episode logged once
}

// eliminatedInOneProcess runs the eval of s in this process under cfg,
// which eliminates variants, and returns its report and manifest; it
// fails t unless the run eliminated a variant.
func eliminatedInOneProcess(t *testing.T, s shape, cfg eval.Config) (*report.Report, *manifest.Manifest) {
	t.Helper()
	rep, err := testEval(s).Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Read(cfg.Log)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Eliminations) == 0 {
		t.Fatal("the test needs an elimination")
	}
	return rep, m
}

// sameEliminations fails t unless got's manifest holds want's
// eliminations, the episodes they saved aside (those in flight at an
// elimination differ from run to run).
func sameEliminations(t *testing.T, what string, want, got *manifest.Manifest) {
	t.Helper()
	strip := func(es []manifest.Elimination) []manifest.Elimination {
		out := make([]manifest.Elimination, len(es))
		for i, e := range es {
			e.Saved = 0
			out[i] = e
		}
		return out
	}
	if d := cmp.Diff(strip(want.Eliminations), strip(got.Eliminations)); d != "" {
		t.Errorf("%s eliminations differ from one process's (-want +got):\n%s", what, d)
	}
}
