package sandbox_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sandbox"
)

func TestForksReleaseAfterCloseAndTheLastFork(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		steps []string // "add", "done", "close"
		want  []bool   // what done and close report, in order
	}{
		"no forks: Close releases":          {[]string{"close"}, []bool{true}},
		"close first, the last fork frees":  {[]string{"add", "add", "close", "done", "done"}, []bool{false, false, true}},
		"forks done first, Close frees":     {[]string{"add", "done", "close"}, []bool{false, true}},
		"a second Close releases nothing":   {[]string{"close", "close"}, []bool{true, false}},
		"a failed fork counts like a close": {[]string{"add", "close", "done"}, []bool{false, true}},
	} {
		t.Run(name, func(t *testing.T) {
			var f sandbox.Forks
			var got []bool
			for _, s := range tc.steps {
				switch s {
				case "add":
					require.NoError(t, f.Add())
				case "done":
					got = append(got, f.Done())
				case "close":
					got = append(got, f.Close())
				}
			}
			require.Equal(t, tc.want, got)
			require.True(t, errors.Is(f.Add(), sandbox.ErrClosed), "no fork after Close")
		})
	}
}
