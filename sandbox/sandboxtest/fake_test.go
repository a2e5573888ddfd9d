package sandboxtest_test

import (
	"context"
	"testing"

	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/sandboxtest"
)

var fakeOpts = &sandboxtest.Options{Without: []sandboxtest.Feature{sandboxtest.Shell, sandboxtest.Binaries}}

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, (&sandboxtest.Fake{}).Provider(), fakeOpts)
}

func TestTestProvider(t *testing.T) {
	if err := sandboxtest.TestProvider((&sandboxtest.Fake{}).Provider(), fakeOpts); err != nil {
		t.Fatal(err)
	}
}

// A driver that breaks a rule is caught by the error-returning entry point,
// with the rule named.
func TestTestProviderReportsABrokenDriver(t *testing.T) {
	broken := &sandboxtest.Fake{Exec: func(context.Context, sandboxtest.Files, sandbox.Cmd) (sandbox.Result, error) {
		return sandbox.Result{ExitCode: 0}, nil // "false" succeeds
	}}
	err := sandboxtest.TestProvider(broken.Provider(), fakeOpts)
	if err == nil {
		t.Fatal("TestProvider accepted a driver whose false exits 0")
	}
	t.Logf("%v", err)
}

func TestFakeExecFunc(t *testing.T) {
	f := &sandboxtest.Fake{Exec: func(ctx context.Context, sb sandboxtest.Files, cmd sandbox.Cmd) (sandbox.Result, error) {
		if err := sb.WriteFile(ctx, "ran.txt", []byte(cmd.Args[0]), 0o644); err != nil {
			return sandbox.Result{}, err
		}
		return sandbox.Result{Stdout: []byte("ok")}, nil
	}}
	sb, err := sandbox.Open(context.Background(), f.Provider(), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	res, err := sb.Exec(context.Background(), sandbox.Cmd{Args: []string{"pytest"}, Dir: ""})
	if err != nil || string(res.Stdout) != "ok" {
		t.Fatalf("Exec = %q, %v", res.Stdout, err)
	}
	got, err := sb.ReadFile(context.Background(), "ran.txt")
	if err != nil || string(got) != "pytest" {
		t.Fatalf("ReadFile = %q, %v", got, err)
	}
}
