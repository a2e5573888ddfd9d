package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proctor-evals/proctor/internal/loopback"
)

// TestReportHTML: report -html writes the run page as one file, replaces
// its own earlier output, and leaves any other file alone.
func TestReportHTML(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "run.jsonl")
	runEval(t, log, 3)
	out := filepath.Join(dir, "report.html")
	var stdout, stderr bytes.Buffer
	for range 2 { // the second time replaces the first
		if code := run([]string{"report", "-html", out, log}, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{htmlGenerator, "<svg", "<style>", "pass rate"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if bytes.Contains(b, []byte("<script")) {
		t.Error("the report holds a script")
	}
	mine := filepath.Join(dir, "notes.html")
	if err := os.WriteFile(mine, []byte("<p>my notes</p>"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"report", "-html", mine, log}, &stdout, &stderr); code != exitError {
		t.Errorf("exit %d replacing a file proctor did not write", code)
	}
	if b, _ := os.ReadFile(mine); string(b) != "<p>my notes</p>" {
		t.Errorf("the file was changed: %q", b)
	}
	stderr.Reset()
	if code := run([]string{"report", "-html", out, log, log}, &stdout, &stderr); code != exitUsage {
		t.Errorf("exit %d for two logs with -html: %s", code, stderr.String())
	}
	if matches, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(matches) > 0 {
		t.Errorf("temporary files left: %v", matches)
	}
}

// TestLoopbackOnly: on a loopback address the viewer answers only to a
// loopback host name, so that a rebinding DNS name cannot read it.
func TestLoopbackOnly(t *testing.T) {
	h := loopback.Only(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	for host, want := range map[string]int{
		"127.0.0.1:8080": 200, "localhost:8080": 200, "[::1]:80": 200, "localhost": 200,
		"evil.example:8080": http.StatusMisdirectedRequest, "10.0.0.1": http.StatusMisdirectedRequest, "": http.StatusMisdirectedRequest,
	} {
		req := httptest.NewRequest("GET", "/", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Host %q: %d, want %d", host, rec.Code, want)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"help", "view"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "-trace-url") {
		t.Errorf("help view: %d %s", code, stdout.String())
	}
}
