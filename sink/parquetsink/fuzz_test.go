package parquetsink_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sink/parquetsink"
)

// FuzzRecords: the record reader, given any bytes as a Parquet file, yields
// records or an error naming the file, and never panics. The seeds are
// whole files the Writer made (with maps, nulls, two row groups) and cuts
// and flips of them. (Go's fuzzer minimizes each new interesting input,
// a few KB here, before it goes on: the progress line may stand still for
// a while meanwhile.)
func FuzzRecords(f *testing.F) {
	dir := f.TempDir()
	w, err := parquetsink.New(dir, &parquetsink.Options{RowGroupRows: 3, Compression: parquetsink.Uncompressed})
	require.NoError(f, err)
	recs := benchRecords(5)
	recs[1].Tags, recs[2].Scores, recs[3].Input = nil, nil, []byte(`{"q":1}`)
	recs[2].ParentRunID, recs[3].ReusedFrom = "run-parent", "run-earlier"
	recs[3].Worker, recs[3].TraceID, recs[3].SpanID = "worker-1:7", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, r := range recs {
		require.NoError(f, w.Write(f.Context(), r))
	}
	require.NoError(f, w.Close(f.Context()))
	whole, err := os.ReadFile(filepath.Join(dir, "part-00000.parquet"))
	require.NoError(f, err)

	f.Add(whole)
	f.Add(whole[:len(whole)/2])
	f.Add(whole[len(whole)/2:])
	f.Add([]byte("PAR1PAR1"))
	f.Add([]byte{})
	for _, at := range []int{4, 40, len(whole) / 3, len(whole) - 12, len(whole) - 9} {
		b := append([]byte(nil), whole...)
		b[at] ^= 0xff
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, err := range parquetsink.RecordsFrom(b, "fuzz.parquet") {
			if err != nil {
				if !strings.HasPrefix(err.Error(), "parquet: fuzz.parquet: ") {
					t.Fatalf("error does not name the file: %v", err)
				}
				return
			}
		}
	})
}
