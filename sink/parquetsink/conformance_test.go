package parquetsink_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/parquetsink"
	"github.com/proctor-evals/proctor/sink/sinktest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts *parquetsink.Options
		many int
	}{
		{"Defaults", nil, 0},
		// Tiny row groups and files: every case crosses row-group and file
		// boundaries.
		{"SmallGroupsAndFiles", &parquetsink.Options{RowGroupRows: 3, FileRows: 50, Compression: parquetsink.Snappy}, 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sinktest.Run(t, sinktest.Target{
				New: func(dir string) (sink.Sink, error) { return parquetsink.New(dir, tc.opts) },
				Read: func(dir string) ([]sink.Record, error) {
					var recs []sink.Record
					for r, err := range parquetsink.Records(dir) {
						if err != nil {
							return recs, err
						}
						recs = append(recs, r)
					}
					return recs, nil
				},
				TimePrecision: time.Microsecond,
				NonFinite:     sinktest.NonFiniteExact,
				InvalidUTF8:   sinktest.InvalidUTF8Replaced,
				Concurrent:    true,
				Many:          tc.many,
			})
		})
	}
}

func readAll(t *testing.T, dir string) []sink.Record {
	t.Helper()
	var recs []sink.Record
	for r, err := range parquetsink.Records(dir) {
		require.NoError(t, err)
		recs = append(recs, r)
	}
	return recs
}
