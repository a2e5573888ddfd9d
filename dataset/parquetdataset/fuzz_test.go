package parquetdataset_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/dataset/parquetdataset"
)

// FuzzParquet: whatever the bytes, the loader returns (Arrow's panics on
// corrupt files are recovered), its errors are *RowError naming the file,
// and every sample it yields has a valid ID.
func FuzzParquet(f *testing.F) {
	good := encode(f, 2, fromJSON(f, sweSchema, sweRows))
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(encode(f, 700, strings1(f, "id", "a", "b\xffc", "d\n")))
	f.Add([]byte("PAR1"))
	f.Add([]byte("PAR1\x00\x00\x00\x00PAR1"))
	dir := f.TempDir()
	m := dataset.Mapping{ID: "instance_id", Input: []string{"problem", "tests"}, Tags: []string{"repo"}}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "d.parquet")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, d := range []dataset.Dataset[task]{
			parquetdataset.Dataset[task]{Path: path, Mapping: m},
			parquetdataset.Dataset[task]{Path: path, AllowUnknownFields: true},
		} {
			for s, err := range d.Samples(context.Background()) {
				if err != nil {
					var re *dataset.RowError
					if !errors.As(err, &re) || re.File != path || re.Row < 0 || !strings.Contains(err.Error(), path) {
						t.Fatalf("error is not a *RowError naming the file: %v", err)
					}
					break
				}
				if err := dataset.CheckID(s.ID); err != nil {
					t.Fatalf("yielded a sample with a bad ID: %v", err)
				}
			}
		}
	})
}
