package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestImportWeight guards what programs link (issue 10.9): a user who
// imports only eval links none of the heavy drivers, and the command links
// neither the engine nor gRPC (which pqarrow pulled in through arrow/flight:
// 443 packages then, 319 now); nor does the online path link gRPC. It
// runs `go list -deps`, so it needs the go command on PATH.
func TestImportWeight(t *testing.T) {
	t.Parallel()
	gocmd, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("PROCTOR_REQUIRE_TOOLS") == "1" {
			t.Fatalf("go command not on PATH: %v", err)
		}
		t.Skipf("go command not on PATH (%v); set PROCTOR_REQUIRE_TOOLS=1 to fail instead", err)
	}
	deps := func(pkg string) []string {
		out, err := exec.Command(gocmd, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	const mod = "github.com/proctor-evals/proctor"
	// What importing the engine never links.
	engineForbids := []string{
		"github.com/apache/arrow-go", "github.com/parquet-go", // Arrow, Parquet
		"github.com/moby", "github.com/docker", // Docker
		"google.golang.org/grpc", "google.golang.org/protobuf",
		"github.com/nats-io",                                                 // NATS
		"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", // OTLP
		"go.opentelemetry.io/proto", mod + "/telemetry", // OTLP payloads, the SDK wiring
		"github.com/BurntSushi/toml", mod + "/harbor", // Harbor tasks
	}
	for _, tc := range []struct {
		pkg       string
		forbidden []string // packages, and the packages under them
		exact     []string // packages only
		max       int      // packages, standard library included
	}{
		{mod + "/eval", engineForbids, nil, 300},
		{mod + "/eval/cli", engineForbids, nil, 300}, // the command line of eval: no more than eval
		{mod + "/cmd/proctor", []string{
			"google.golang.org/grpc", "github.com/apache/arrow-go/v18/arrow/flight",
			"github.com/apache/arrow-go/v18/parquet/pqarrow",
			"github.com/moby", "github.com/nats-io",
		}, []string{mod + "/eval"}, 365}, // the engine: the command links eval/report (361 with usage, internal/sidecar and internal/judging)
		// The online path: judging recorded conversations links no
		// protobuf; the OTLP loader links protobuf but not gRPC, which
		// the OTLP collector packages pull in (it decodes into TracesData
		// for that reason).
		{mod + "/harness/replay", []string{"google.golang.org/protobuf", "google.golang.org/grpc", "go.opentelemetry.io/proto"}, nil, 250},
		{mod + "/dataset/otlp", []string{"google.golang.org/grpc", "github.com/grpc-ecosystem", "go.opentelemetry.io/otel/sdk"}, nil, 290},
	} {
		list := deps(tc.pkg)
		for _, p := range list {
			for _, f := range tc.forbidden {
				if p == f || strings.HasPrefix(p, f+"/") {
					t.Errorf("%s links %s", tc.pkg, p)
				}
			}
			for _, f := range tc.exact {
				if p == f {
					t.Errorf("%s links %s", tc.pkg, p)
				}
			}
		}
		if len(list) > tc.max {
			t.Errorf("%s links %d packages, more than %d: what grew?", tc.pkg, len(list), tc.max)
		}
	}
}
