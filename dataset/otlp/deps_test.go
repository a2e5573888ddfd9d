package otlp_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestImportWeight guards what the online path links: harness/replay (and
// so a program judging recorded conversations) no protobuf, and this
// package protobuf but not gRPC, which the OTLP collector packages pull in
// (this package decodes into TracesData for that reason).
func TestImportWeight(t *testing.T) {
	t.Parallel()
	gocmd, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("PROCTOR_REQUIRE_TOOLS") == "1" {
			t.Fatalf("go command not on PATH: %v", err)
		}
		t.Skipf("go command not on PATH (%v); set PROCTOR_REQUIRE_TOOLS=1 to fail instead", err)
	}
	const mod = "github.com/proctor-evals/proctor"
	for pkg, forbidden := range map[string][]string{
		mod + "/harness/replay": {"google.golang.org/protobuf", "google.golang.org/grpc", "go.opentelemetry.io/proto"},
		mod + "/dataset/otlp":   {"google.golang.org/grpc", "github.com/grpc-ecosystem", "go.opentelemetry.io/otel/sdk"},
	} {
		out, err := exec.Command(gocmd, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, p := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if p == f || strings.HasPrefix(p, f+"/") {
					t.Errorf("%s links %s", pkg, p)
				}
			}
		}
	}
}
