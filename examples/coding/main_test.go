package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sandbox/docker"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// checkRun runs the example and checks the pattern it must produce: every
// episode whose agent applied the right patch passes, every wrong patch
// fails its tests, nothing errors, and both outcomes occur.
func checkRun(t *testing.T, o Options, wantSamples int) {
	t.Helper()
	o.Dir = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := run(ctx, o)
	require.NoError(t, err)
	t.Logf("\n%s", rep)
	require.Equal(t, wantSamples, rep.Samples)
	require.Equal(t, wantSamples*3, rep.Episodes)
	require.Zero(t, rep.Errored, "no infrastructure errors")
	require.Zero(t, rep.Unscored)
	require.Positive(t, rep.Passed)
	require.Positive(t, rep.Failed)

	var n int
	for r, err := range jsonl.Records(filepath.Join(o.Dir, "coding.jsonl")) {
		require.NoError(t, err)
		n++
		var out Result
		require.NoError(t, json.Unmarshal(r.Output, &out), "%s/%d output", r.SampleID, r.Epoch)
		want := sink.Fail
		if out.Kind == "fix" {
			want = sink.Pass
		}
		require.Equal(t, want, r.Status, "%s/%d: a %q patch: %s", r.SampleID, r.Epoch, out.Kind, r.Reason)
		if want == sink.Fail {
			require.Contains(t, r.Reason, "FAIL", "the reason is the tail of the test output")
		}
		require.NotEmpty(t, r.Transcript, "the agent's steps are in the transcript")
	}
	require.Equal(t, wantSamples*3, n)
}

func TestLocal(t *testing.T) {
	checkRun(t, Options{Sandbox: "local", Seed: 42}, len(goTasks())+len(shellTasks()))
}

// TestDocker runs against a reachable Docker engine; it skips without one,
// and fails instead with PROCTOR_REQUIRE_DOCKER=1.
func TestDocker(t *testing.T) {
	if msg := dockerMissing(); msg != "" {
		if os.Getenv("PROCTOR_REQUIRE_DOCKER") == "1" {
			t.Fatalf("PROCTOR_REQUIRE_DOCKER=1 but %s", msg)
		}
		t.Skip(msg)
	}
	checkRun(t, Options{Sandbox: "docker", Seed: 42}, len(shellTasks()))
}

// dockerMissing says why the docker mode cannot run here, or "".
func dockerMissing() string {
	if _, err := os.Stat(docker.BusyboxPath); err != nil {
		return ErrNoBusybox.Error()
	}
	cli, err := docker.NewClient()
	if err != nil {
		return "no Docker client: " + err.Error()
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		return "no Docker engine reachable: " + err.Error()
	}
	return ""
}
