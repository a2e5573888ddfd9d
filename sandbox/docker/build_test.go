package docker_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/docker"
)

// BuildImage builds a directory's Dockerfile with the directory as its
// context; a failing step is an error with the builder's message.
func TestBuildImage(t *testing.T) {
	cli := engine(t)
	ctx := context.Background()
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Dockerfile", "FROM "+testImage+"\nCOPY greeting.txt /etc/greeting\nWORKDIR /app\n")
	write("greeting.txt", "from the context\n")
	const tag = "proctor-test-buildimage:latest"
	if err := docker.BuildImage(ctx, cli, dir, tag); err != nil {
		t.Fatalf("BuildImage: %v", err)
	}
	p := docker.New(cli, nil)
	t.Cleanup(func() { docker.Cleanup(context.Background(), cli, runID(p)) })
	sb, err := sandbox.Open(ctx, p, sandbox.Spec{Image: tag})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"cat", "/etc/greeting"}})
	if err != nil || string(res.Stdout) != "from the context\n" {
		t.Fatalf("cat /etc/greeting: %q, %v", res.Stdout, err)
	}

	write("Dockerfile", "FROM "+testImage+"\nRUN echo broken step >&2; exit 7\n")
	err = docker.BuildImage(ctx, cli, dir, "proctor-test-buildimage:broken")
	if err == nil {
		t.Fatal("a failing RUN built")
	}
	if want := "returned a non-zero code: 7"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
}
