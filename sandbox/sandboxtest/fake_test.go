package sandboxtest_test

import (
	"context"
	"testing"

	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/sandboxtest"
)

func TestFakeConformance(t *testing.T) {
	sandboxtest.Run(t, &sandboxtest.Fake{}, sandboxtest.Without(sandboxtest.Shell))
}

func TestFakeExecFunc(t *testing.T) {
	f := &sandboxtest.Fake{Exec: func(ctx context.Context, sb sandbox.Sandbox, cmd sandbox.Cmd) (sandbox.Result, error) {
		if err := sb.WriteFile(ctx, "ran.txt", []byte(cmd.Args[0]), 0o644); err != nil {
			return sandbox.Result{}, err
		}
		return sandbox.Result{Stdout: []byte("ok")}, nil
	}}
	sb, err := sandbox.Open(context.Background(), f, sandbox.Spec{})
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
