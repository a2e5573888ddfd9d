package harbor_test

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/proctor-evals/proctor/harbor"
)

func FuzzParseConfig(f *testing.F) {
	for _, p := range []string{"testdata/tasks/hello/task.toml", "testdata/tasks/broken-solution/task.toml", "testdata/tasks/json-reward/task.toml", "testdata/bad/unreadable-config/task.toml"} {
		data, err := os.ReadFile(filepath.FromSlash(p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("[environment]\ncpus = 1e400\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := harbor.ParseConfig(data)
		if err != nil {
			return
		}
		task := harbor.Task{Config: c}
		for _, d := range []float64{float64(task.AgentTimeout()), float64(task.VerifierTimeout()), float64(task.BuildTimeout())} {
			if d <= 0 {
				t.Fatalf("a timeout of %v from %q", d, data)
			}
		}
		task.Tags()
		task.Spec()
	})
}

func FuzzParseReward(f *testing.F) {
	for _, s := range []struct{ name, data string }{
		{"reward.txt", "1\n"}, {"reward.txt", "0.5"}, {"reward.txt", ""},
		{"reward.json", `{"reward": 1.0, "tests": 3}`}, {"reward.json", `{"a": 1}`}, {"reward.json", `{"reward": 1e999}`},
	} {
		f.Add(s.name, []byte(s.data))
	}
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		r, scores, err := harbor.ParseReward(name, data)
		if err != nil {
			return
		}
		if math.IsNaN(r) || math.IsInf(r, 0) {
			t.Fatalf("reward %v from %q", r, data)
		}
		for k, v := range scores {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("score %s = %v from %q", k, v, data)
			}
		}
	})
}
