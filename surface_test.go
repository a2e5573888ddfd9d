package proctor_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// exported lists the exported top-level identifiers of the package in dir
// (test files aside), as go doc shows them, and for each the packages its
// declaration names (flag, io…).
func exported(t *testing.T, dir string) map[string][]string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		uses := func(n ast.Node) []string {
			var pkgs []string
			ast.Inspect(n, func(n ast.Node) bool {
				if s, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := s.X.(*ast.Ident); ok && !slices.Contains(pkgs, id.Name) {
						pkgs = append(pkgs, id.Name)
					}
				}
				return true
			})
			return pkgs
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					out[d.Name.Name] = uses(d.Type)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							out[s.Name.Name] = uses(s.Type)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								out[n.Name] = nil
							}
						}
					}
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s exports nothing: is the path right?", dir)
	}
	return out
}

// TestEvalExportsNoCommandLine: go doc eval shows what a user of an eval
// needs. The command line lives in eval/cli, the manifest in eval/manifest,
// the transcript in harness; eval re-exports none of them.
func TestEvalExportsNoCommandLine(t *testing.T) {
	t.Parallel()
	for name, pkgs := range exported(t, "eval") {
		switch {
		case slices.Contains([]string{"Main", "MainArgs", "RunCommand", "PrintOutcome", "BindFlags", "WorkerID", "JobShard"}, name):
			t.Errorf("eval exports %s: the command line belongs to eval/cli", name)
		case slices.Contains([]string{"Manifest", "DatasetIdentity", "ManifestMismatchError", "ManifestPath", "ReadManifest", "Trace", "Transcript"}, name):
			t.Errorf("eval exports %s: use eval/manifest or harness, not a re-export", name)
		case slices.Contains(pkgs, "flag"):
			t.Errorf("eval exports %s, which names package flag: the command line belongs to eval/cli", name)
		}
	}
}

// TestSinkExportsNoCodec: sink is the record and the Sink contract; the
// codec helpers that only proctor's packages call live under internal/.
func TestSinkExportsNoCodec(t *testing.T) {
	t.Parallel()
	for name := range exported(t, "sink") {
		for _, prefix := range []string{"Append", "Decode", "Scan", "Line", "Encode", "Unmarshal", "Marshal"} {
			if strings.HasPrefix(name, prefix) {
				t.Errorf("sink exports %s: codec helpers belong to internal/jsontext or internal/recordjson", name)
			}
		}
	}
}

// TestDatasetsImportNothingAbove: a dataset is the floor the others stand
// on. No package under dataset/ imports a harness, a judge, a sandbox or
// the engine (dataset/otlp once imported harness/replay for its element
// type, which now lives in dataset/recorded); tests may.
func TestDatasetsImportNothingAbove(t *testing.T) {
	t.Parallel()
	const module = "github.com/proctor-evals/proctor/"
	above := []string{"harness", "judge", "scorer", "sandbox", "eval", "sink", "cluster", "view", "review", "history", "telemetry"}
	fset := token.NewFileSet()
	err := filepath.WalkDir("dataset", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || strings.Contains(p, "testdata") {
			return err
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			rest, ok := strings.CutPrefix(path, module)
			if !ok {
				continue
			}
			top, _, _ := strings.Cut(rest, "/")
			if slices.Contains(above, top) {
				t.Errorf("%s imports %s: a dataset package imports nothing above the datasets", p, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReportImportsNoHarness: the report folds records, and a record's
// usage is a usage.Usage; eval/report has no reason to link the harness
// (the episode, its transcript and its sandbox). Tests may.
func TestReportImportsNoHarness(t *testing.T) {
	t.Parallel()
	const harness = "github.com/proctor-evals/proctor/harness"
	fset := token.NewFileSet()
	entries, err := os.ReadDir("eval/report")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		p := filepath.Join("eval/report", e.Name())
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if path := strings.Trim(imp.Path.Value, `"`); path == harness || strings.HasPrefix(path, harness+"/") {
				t.Errorf("%s imports %s: the report speaks usage.Usage, not the harness", p, path)
			}
		}
	}
}

// TestGatewayImportsNoEngine: the model gateway knows an episode only
// through its Meter; it imports nothing of proctor but package usage, the
// semantic-convention names, the Retry-After parser, the providers' usage shapes and package harness, whose Meter and Event the
// engine speaks (tests and the test agent aside).
func TestGatewayImportsNoEngine(t *testing.T) {
	t.Parallel()
	const module = "github.com/proctor-evals/proctor/"
	// harness too: Gateway.OpenEpisode takes the engine's harness.Meter
	// and records harness.Events (so that eval.Config.Models takes a
	// *Gateway while eval links no gateway); harness is not the engine.
	// internal/providerusage: the providers' usage shapes, shared with
	// the judges' clients, a leaf over usage.
	// internal/retryafter is a leaf: the Retry-After parser the judges
	// share. sink/jsonl too: the call store is written with the log's own
	// Writer (its lock, its group commit) and reports a torn tail in its
	// terms, reused rather than copied; it is the log, not the engine.
	allowed := []string{module + "usage", module + "internal/semconv", module + "gateway", module + "harness", module + "internal/retryafter", module + "sink/jsonl", module + "internal/providerusage"}
	fset := token.NewFileSet()
	err := filepath.WalkDir("gateway", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testagent" {
			return filepath.SkipDir // a module of its own, a program
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			if strings.HasPrefix(path, module) && !slices.Contains(allowed, path) && !strings.HasPrefix(path, module+"gateway/") {
				t.Errorf("%s imports %s: the gateway imports nothing of the engine", p, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// exportedMethods lists the exported methods of the package in dir (test
// files aside), as "Type.Method".
func exportedMethods(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || !fd.Name.IsExported() {
				continue
			}
			typ := fd.Recv.List[0].Type
			if s, ok := typ.(*ast.StarExpr); ok {
				typ = s.X
			}
			switch x := typ.(type) {
			case *ast.IndexExpr:
				typ = x.X
			case *ast.IndexListExpr:
				typ = x.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				out = append(out, id.Name+"."+fd.Name.Name)
			}
		}
	}
	return out
}

// TestEvalExportsNothingOnlyTheClusterCalls: the halves a distributed run
// is built of (a worker's Work, a coordinator's Open and Recording, the
// Assignment and Finished they pass) are internal/distrib's, and the line
// between the agent's and the judge's usage is internal/judging's: go doc
// of eval and harness shows none of them.
func TestEvalExportsNothingOnlyTheClusterCalls(t *testing.T) {
	t.Parallel()
	for name := range exported(t, "eval") {
		if slices.Contains([]string{"Assignment", "Finished", "Recording", "RecordingStats"}, name) {
			t.Errorf("eval exports %s, which only package cluster uses: it belongs to internal/distrib", name)
		}
	}
	for _, m := range append(exportedMethods(t, "eval"), exportedMethods(t, "harness")...) {
		if slices.Contains([]string{"Eval.Open", "Eval.Work", "Episode.StartJudging", "Episode.Judging"}, m) {
			t.Errorf("%s is exported, which only the engine or package cluster calls", m)
		}
	}
}
