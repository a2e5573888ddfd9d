package dataset_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
)

type task struct {
	Q string `json:"q"`
	A int    `json:"a"`
}

func ids[T any](t *testing.T, d dataset.Dataset[T]) []string {
	t.Helper()
	s, err := dataset.Collect(context.Background(), d)
	require.NoError(t, err)
	var out []string
	for _, x := range s {
		out = append(out, x.ID)
	}
	return out
}

func write(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

func TestJSONL(t *testing.T) {
	t.Parallel()
	path := write(t, "d.jsonl", `{"id":"a","input":{"q":"1+1","a":2},"tags":{"level":"easy"}}

{"id":"b","input":{"q":"2+2","a":4}}
`)
	got, err := dataset.Collect(context.Background(), dataset.JSONL[task]{Path: path})
	require.NoError(t, err)
	want := dataset.Slice[task]{
		{ID: "a", Input: task{"1+1", 2}, Tags: map[string]string{"level": "easy"}},
		{ID: "b", Input: task{"2+2", 4}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
}

func TestMalformedRowsNameFileAndLine(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		content string
		line    int
		want    string
	}{
		"truncated":         {`{"id":"a","input":{"q":"x","a":1}}` + "\n" + `{"id":"b","input":{"q":` + "\n", 2, "unexpected EOF"},
		"missing id":        {`{"input":{"q":"x","a":1}}`, 1, `field "id": missing`},
		"wrong input type":  {`{"id":"a","input":{"q":"x","a":"two"}}`, 1, `"input"`},
		"unknown field":     {`{"id":"a","input":{},"tag":{"x":"y"}}`, 1, `unknown field "tag"`},
		"after blank lines": {"\n\n" + `{"id":"a",}`, 3, "invalid character"},
	} {
		t.Run(name, func(t *testing.T) {
			path := write(t, "d.jsonl", tc.content)
			_, err := dataset.Collect(context.Background(), dataset.JSONL[task]{Path: path})
			var re *dataset.RowError
			require.ErrorAs(t, err, &re)
			require.Equal(t, path, re.File)
			require.Equal(t, tc.line, re.Line)
			require.ErrorContains(t, err, fmt.Sprintf("%s:%d:", path, tc.line))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func parseRow(row map[string]string) (dataset.Sample[task], error) {
	a, err := strconv.Atoi(row["answer"])
	if err != nil {
		return dataset.Sample[task]{}, fmt.Errorf("answer: %w", err)
	}
	return dataset.Sample[task]{ID: row["id"], Input: task{row["question"], a}, Tags: map[string]string{"level": row["level"]}}, nil
}

func TestCSV(t *testing.T) {
	t.Parallel()
	path := write(t, "d.csv", "id,question,answer,level\na,\"1+1, quoted\",2,easy\nb,2+2,4,hard\n")
	got, err := dataset.Collect(context.Background(), dataset.CSV[task]{Path: path, Parse: parseRow})
	require.NoError(t, err)
	require.Equal(t, dataset.Slice[task]{
		{ID: "a", Input: task{"1+1, quoted", 2}, Tags: map[string]string{"level": "easy"}},
		{ID: "b", Input: task{"2+2", 4}, Tags: map[string]string{"level": "hard"}},
	}, got)

	for name, tc := range map[string]struct {
		content string
		line    int
	}{
		"bad value":      {"id,question,answer,level\na,q,2,easy\nb,q,four,hard\n", 3},
		"wrong arity":    {"id,question,answer,level\na,q,2,easy\nb,q\n", 3},
		"empty id":       {"id,question,answer,level\n,q,2,easy\n", 2},
		"unclosed quote": {"id,question,answer,level\na,\"q,2,easy\n", 2},
	} {
		t.Run(name, func(t *testing.T) {
			path := write(t, "d.csv", tc.content)
			_, err := dataset.Collect(context.Background(), dataset.CSV[task]{Path: path, Parse: parseRow})
			var re *dataset.RowError
			require.ErrorAs(t, err, &re)
			require.Equal(t, tc.line, re.Line, err.Error())
		})
	}
}

func numbered(n int, level func(i int) string) dataset.Slice[int] {
	var d dataset.Slice[int]
	for i := range n {
		d = append(d, dataset.Sample[int]{ID: fmt.Sprintf("s%02d", i), Input: i, Tags: map[string]string{"level": level(i)}})
	}
	return d
}

func TestTransforms(t *testing.T) {
	t.Parallel()
	d := numbered(20, func(i int) string { return []string{"easy", "hard"}[min(i/15, 1)] })
	even := dataset.Filter[int](d, func(s dataset.Sample[int]) bool { return s.Input%2 == 0 })
	require.Equal(t, []string{"s00", "s02", "s04"}, ids(t, dataset.Limit(even, 3)))
	require.Empty(t, ids(t, dataset.Limit[int](d, 0)))

	a, b := ids(t, dataset.Shuffle[int](d, 7)), ids(t, dataset.Shuffle[int](d, 7))
	require.Equal(t, a, b, "a seed fixes the order")
	require.NotEqual(t, ids(t, d), a)
	require.ElementsMatch(t, ids(t, d), a, "a shuffle keeps every sample")
	require.NotEqual(t, a, ids(t, dataset.Shuffle[int](d, 8)))

	strat := ids(t, dataset.Stratified[int](d, "level", 3, 1))
	require.Len(t, strat, 6, "3 easy and 3 of the 5 hard")
	hard := 0
	for _, id := range strat {
		if n, _ := strconv.Atoi(id[1:]); n >= 15 {
			hard++
		}
	}
	require.Equal(t, 3, hard)
	require.Equal(t, strat, ids(t, dataset.Stratified[int](d, "level", 3, 1)))

	var union []string
	for i := range 3 {
		shard := ids(t, dataset.Shard[int](d, i, 3))
		require.NotEmpty(t, shard)
		union = append(union, shard...)
	}
	require.ElementsMatch(t, ids(t, d), union, "shards partition the dataset")
}

func TestTransformsPassErrorsOn(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	bad := dataset.Func[int](func(ctx context.Context) iter.Seq2[dataset.Sample[int], error] {
		return func(yield func(dataset.Sample[int], error) bool) {
			if yield(dataset.Sample[int]{ID: "a"}, nil) {
				yield(dataset.Sample[int]{}, boom)
			}
		}
	})
	for name, d := range map[string]dataset.Dataset[int]{
		"filter":     dataset.Filter[int](bad, func(dataset.Sample[int]) bool { return false }),
		"limit":      dataset.Limit[int](bad, 5),
		"shuffle":    dataset.Shuffle[int](bad, 1),
		"stratified": dataset.Stratified[int](bad, "x", 1, 1),
	} {
		_, err := dataset.Collect(context.Background(), d)
		require.ErrorIs(t, err, boom, name)
	}
}
