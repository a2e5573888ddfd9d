package manifest_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval/manifest"
)

func sample() *manifest.Manifest {
	return &manifest.Manifest{
		Schema: manifest.Schema, Eval: "math word problems", CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Epochs: 3, Seed: "42", Versions: manifest.Versions{Harness: "h1", Judge: "j1"},
		Dataset: manifest.DatasetIdentity{Samples: 2, Hash: "ab"}, Proctor: "v0.3.0",
	}
}

func TestWriteRead(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "run.jsonl")
	require.Equal(t, filepath.Join(filepath.Dir(log), "run.manifest.json"), manifest.Path(log))

	_, err := manifest.Read(log)
	require.True(t, errors.Is(err, fs.ErrNotExist), "a log without a manifest: %v", err)

	m := sample()
	m.Shard = "1/3"
	require.NoError(t, manifest.Write(log, m))
	got, err := manifest.Read(log)
	require.NoError(t, err)
	require.Equal(t, m, got)
	st, err := os.Stat(manifest.Path(log))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o644), st.Mode().Perm())

	m.Seed = "7"
	require.NoError(t, manifest.Write(log, m), "written over atomically")
	got, err = manifest.Read(log)
	require.NoError(t, err)
	require.Equal(t, "7", got.Seed)
	entries, err := os.ReadDir(filepath.Dir(log))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left: %v", entries)
}

func TestReadRefusesWhatItCannotRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"unknown-field": `{"schema":1,"run_id":"r","eval":"e","created_at":"2026-01-01T00:00:00Z","epochs":1,"seed":"0","dataset":{"samples":0,"hash":""},"colour":"red"}`,
		"schema":        `{"schema":2,"run_id":"r"}`,
		"trailing":      `{"schema":1,"run_id":"r"} {}`,
		"not-json":      `run_id: r`,
	} {
		log := filepath.Join(dir, name+".jsonl")
		require.NoError(t, os.WriteFile(manifest.Path(log), []byte(body), 0o644))
		_, err := manifest.Read(log)
		require.Error(t, err, name)
		require.Contains(t, err.Error(), manifest.Path(log), "the error names the file")
	}
}

func TestRunID(t *testing.T) {
	t.Parallel()
	m := sample()
	id := manifest.RunID(m)
	require.Regexp(t, regexp.MustCompile(`^math-word-problems-[0-9a-f]{12}$`), id)

	same := *m
	same.CreatedAt, same.Proctor, same.Shard, same.RunID = time.Now(), "v9", "2/3", "other"
	require.Equal(t, id, manifest.RunID(&same), "creation time, proctor version, shard and a given run ID play no part")

	for name, change := range map[string]func(*manifest.Manifest){
		"eval":    func(m *manifest.Manifest) { m.Eval = "math word problems 2" },
		"epochs":  func(m *manifest.Manifest) { m.Epochs = 4 },
		"seed":    func(m *manifest.Manifest) { m.Seed = "43" },
		"harness": func(m *manifest.Manifest) { m.Versions.Harness = "h2" },
		"judge":   func(m *manifest.Manifest) { m.Versions.Judge = "j2" },
		"sandbox": func(m *manifest.Manifest) { m.Versions.Sandbox = "s" },
		"samples": func(m *manifest.Manifest) { m.Dataset.Samples = 3 },
		"hash":    func(m *manifest.Manifest) { m.Dataset.Hash = "cd" },
	} {
		other := *m
		change(&other)
		require.NotEqual(t, id, manifest.RunID(&other), name)
	}

	for name, want := range map[string]string{
		"":                              `^run-[0-9a-f]{12}$`,
		"日本語":                           `^run-[0-9a-f]{12}$`,
		"a/b c":                         `^a-b-c-[0-9a-f]{12}$`,
		"x" + string(make([]byte, 100)): `^x-[0-9a-f]{12}$`,
		"swe-bench_v1.2":                `^swe-bench_v1\.2-[0-9a-f]{12}$`,
	} {
		other := *m
		other.Eval = name
		require.Regexp(t, regexp.MustCompile(want), manifest.RunID(&other), "%q", name)
	}
	long := *m
	long.Eval = "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz"
	require.Len(t, manifest.RunID(&long), 40+1+12)
}

func TestSameRun(t *testing.T) {
	t.Parallel()
	a, b := sample(), sample()
	b.Shard, b.CreatedAt, b.Proctor = "2/3", time.Now(), "v9"
	require.Empty(t, manifest.SameRun(a, b), "shard, creation time and proctor version may differ")

	b.Dataset.Hash = ""
	require.Empty(t, manifest.SameRun(a, b), "a hash not computed yet matches any")

	b.Seed, b.Versions.Judge, b.Dataset.Hash = "7", "j2", "cd"
	require.Equal(t, []manifest.Difference{
		{"seed", "42", "7"}, {"judge version", "j1", "j2"}, {"dataset hash", "ab", "cd"},
	}, manifest.SameRun(a, b))
	require.Equal(t, `seed: "42" and "7"`, manifest.SameRun(a, b)[0].String())
}

func TestDiff(t *testing.T) {
	t.Parallel()
	old, now := sample(), sample()
	now.Epochs, now.Dataset = 5, manifest.DatasetIdentity{Samples: 9, Hash: "ff"}
	require.Empty(t, now.Diff(old), "more epochs or another dataset are not stale")
	now.Shard = "0/2"
	require.Equal(t, []string{`shard: "" in the log, "0/2" now`}, now.Diff(old))
	err := &manifest.MismatchError{Log: "run.jsonl", Diffs: now.Diff(old)}
	require.Contains(t, err.Error(), "run.jsonl")
	require.Contains(t, err.Error(), `shard: "" in the log, "0/2" now`)
}

func TestIdentity(t *testing.T) {
	t.Parallel()
	ids, inputs := []string{"a", "b"}, []string{`1`, `2`}
	of := func(ids, inputs []string) manifest.DatasetIdentity {
		return manifest.Identity(len(ids), func(i int) string { return ids[i] }, func(i int) []byte { return []byte(inputs[i]) })
	}
	got := of(ids, inputs)
	require.Equal(t, 2, got.Samples)
	require.Regexp(t, `^sum:[0-9a-f]{64}$`, got.Hash)
	require.Equal(t, got, of(ids, inputs))
	require.NotEqual(t, got.Hash, of([]string{"b", "a"}, inputs).Hash, "order counts")
	require.NotEqual(t, got.Hash, of([]string{"a", "b2"}, []string{`1`, ``}).Hash, "fields are length-prefixed: no shifting a byte across")
	require.Equal(t, got, of([]string{"b", "a"}, []string{`2`, `1`}), "the same samples in another order")
	require.NotEqual(t, got.Hash, of([]string{"a"}, []string{`1`}).Hash)

	// Summed in parts, in any order, it is the same.
	var x, y manifest.IdentitySum
	var scratch []byte
	scratch = x.Add("b", []byte(`2`), scratch)
	y.Add("a", []byte(`1`), scratch)
	y.Merge(x)
	require.Equal(t, got, y.Identity(2))

	old := manifest.DatasetIdentity{Samples: 2, Hash: strings.Repeat("ab", 32)} // an older proctor's
	require.False(t, got.Comparable(old), "hashes computed another way tell nothing")
	require.True(t, got.Comparable(of([]string{"c"}, []string{`3`})))
	require.False(t, got.Comparable(manifest.DatasetIdentity{Samples: 2}), "not computed yet")
}

// FuzzRead: any manifest file either reads, and then writes back to what
// reads the same, or fails naming the file.
func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"schema":1,"run_id":"r","eval":"e","created_at":"2026-01-01T00:00:00Z","epochs":1,"seed":"0","dataset":{"samples":0,"hash":""}}`))
	f.Add([]byte(`{"schema":1,"versions":{"judge":"v"},"shard":"0/3"}`))
	f.Add([]byte(`{"schema":2}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		log := filepath.Join(dir, "run.jsonl")
		if err := os.WriteFile(manifest.Path(log), b, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := manifest.Read(log)
		if err != nil {
			if !regexp.MustCompile(regexp.QuoteMeta(manifest.Path(log))).MatchString(err.Error()) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		log2 := filepath.Join(dir, "again.jsonl")
		if err := manifest.Write(log2, m); err != nil {
			t.Fatal(err)
		}
		m2, err := manifest.Read(log2)
		if err != nil {
			t.Fatalf("a written manifest does not read: %v", err)
		}
		if manifest.RunID(m) != manifest.RunID(m2) || !m.CreatedAt.Equal(m2.CreatedAt) || m.Seed != m2.Seed || m.Dataset != m2.Dataset {
			t.Fatalf("round trip changed the manifest: %+v → %+v", m, m2)
		}
	})
}
