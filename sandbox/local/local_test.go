package local_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/local"
	"github.com/proctor-evals/proctor/sandbox/sandboxtest"
)

// busyboxPath puts busybox's applets first on PATH, so that the suite's
// tools (nc in particular) behave as in the Docker image. Without busybox
// the host's tools are used.
func busyboxPath(t *testing.T) map[string]string {
	const bb = "/bin/busybox"
	if _, err := os.Stat(bb); err != nil {
		t.Logf("no %s: using the host's tools", bb)
		return nil
	}
	dir := t.TempDir()
	for _, applet := range []string{"nc"} {
		if err := os.Symlink(bb, filepath.Join(dir, applet)); err != nil {
			t.Fatal(err)
		}
	}
	return map[string]string{"PATH": dir + string(os.PathListSeparator) + os.Getenv("PATH")}
}

func TestConformance(t *testing.T) {
	env := busyboxPath(t)
	for _, m := range []local.Method{local.Overlay, local.Reflink, local.Copy} {
		t.Run(string(m), func(t *testing.T) {
			p := local.New(local.WithDir(t.TempDir()), local.WithMethod(m))
			if p.Method() == "" {
				t.Skipf("fork method %s does not work on this host", m)
			}
			t.Logf("method %s, guarantees %+v", p.Method(), p.Guarantees())
			sandboxtest.Run(t, p, sandboxtest.WithSpec(sandbox.Spec{Env: env}))
		})
	}
}
