// Package agentbin builds the model gateway's test agent
// (gateway/internal/testagent, a module of its own) for tests that run it:
// the gateway's, and the engine's and sandbox drivers' behind the gateway.
package agentbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// module is the test agent's module path, as go build names it in errors.
const module = "github.com/proctor-evals/proctor/gateway/internal/testagent"

// Build builds the test agent, static (CGO_ENABLED=0, for a FROM-scratch
// image or another sandbox), into a temporary directory of t and returns
// its path. The agent's module needs the official OpenAI and Anthropic Go
// SDKs: when they cannot be fetched or built (no module cache and no
// network), Build skips t with the build's output, and fails it instead
// under PROCTOR_REQUIRE_TOOLS=1. An error in the agent's own code fails t.
func Build(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("agentbin: cannot locate the test agent's source")
	}
	src := filepath.Join(filepath.Dir(file), "..", "..", "gateway", "internal", "testagent")
	bin := filepath.Join(t.TempDir(), "testagent")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=readonly")
	if out, err := cmd.CombinedOutput(); err != nil {
		// The agent's own code not compiling is a defect, never a skip.
		if os.Getenv("PROCTOR_REQUIRE_TOOLS") == "1" || strings.Contains(string(out), "# "+module+"\n") {
			t.Fatalf("agentbin: building the test agent: %v\n%s", err, out)
		}
		t.Skipf("agentbin: cannot build the test agent (its SDK modules may be missing; PROCTOR_REQUIRE_TOOLS=1 makes this fail): %v\n%s", err, out)
	}
	return bin
}
