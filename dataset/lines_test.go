package dataset_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
)

func TestLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.jsonl")
	require.NoError(t, os.WriteFile(path, []byte("\uFEFFa\n\n  \nb\r\n"+strings.Repeat("c", 40)+"\nd"), 0o644))
	var got []string
	var nums, skips []int
	var err error
	for l, e := range dataset.Lines(context.Background(), path, 30) {
		if e != nil {
			err = e
			break
		}
		got = append(got, string(l.Bytes))
		nums, skips = append(nums, l.Number), append(skips, l.Skip)
	}
	require.Equal(t, []string{"a\n", "b\r\n"}, got, "blank lines skipped, the byte-order mark cut")
	require.Equal(t, []int{1, 4}, nums)
	require.Equal(t, []int{3, 0}, skips)
	var re *dataset.RowError
	require.ErrorAs(t, err, &re)
	require.Equal(t, 5, re.Line, "the long line is named")
	require.Equal(t, path, re.File)
}
