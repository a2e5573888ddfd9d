package parquetdataset_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/dataset/parquetdataset"
)

// task is the input of a SWE-bench-like row.
type task struct {
	Problem string   `json:"problem"`
	Tests   []string `json:"tests"`
}

var sweSchema = arrow.NewSchema([]arrow.Field{
	{Name: "instance_id", Type: arrow.BinaryTypes.String},
	{Name: "repo", Type: arrow.BinaryTypes.String},
	{Name: "difficulty", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "problem", Type: arrow.BinaryTypes.LargeString},
	{Name: "tests", Type: arrow.ListOf(arrow.BinaryTypes.String)},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64},
}, nil)

const sweRows = `[
	{"instance_id": "django-1", "repo": "django", "difficulty": 2, "problem": "fix it", "tests": ["t1", "t2"], "score": 0.5},
	{"instance_id": "sympy-2", "repo": "sympy", "difficulty": null, "problem": "a b/\"c\" 🙂", "tests": [], "score": 1},
	{"instance_id": "flask-3", "repo": "flask", "difficulty": 1, "problem": "p3", "tests": ["t"], "score": 0}
]`

// encode writes batches as one Parquet file, in row groups of at most
// groupRows rows, with Arrow Go's writer.
func encode(t testing.TB, groupRows int64, batches ...arrow.RecordBatch) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(batches[0].Schema(), &buf, pq.NewWriterProperties(pq.WithMaxRowGroupLength(groupRows)), pqarrow.DefaultWriterProps())
	require.NoError(t, err)
	for _, b := range batches {
		require.NoError(t, w.Write(b))
	}
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func fromJSON(t testing.TB, sc *arrow.Schema, rows string) arrow.RecordBatch {
	t.Helper()
	b, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(rows))
	require.NoError(t, err)
	t.Cleanup(b.Release)
	return b
}

func writeFile(t testing.TB, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "d.parquet")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

// strings1 is a record of one string column whose values need not be valid
// UTF-8 (RecordFromJSON would replace invalid bytes).
func strings1(t testing.TB, name string, vals ...string) arrow.RecordBatch {
	t.Helper()
	bld := array.NewStringBuilder(memory.DefaultAllocator)
	defer bld.Release()
	bld.AppendValues(vals, nil)
	col := bld.NewArray()
	defer col.Release()
	b := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: name, Type: arrow.BinaryTypes.String}}, nil), []arrow.Array{col}, int64(len(vals)))
	t.Cleanup(b.Release)
	return b
}

func TestParquet(t *testing.T) {
	t.Parallel()
	path := writeFile(t, encode(t, 2, fromJSON(t, sweSchema, sweRows)))
	for name, tc := range map[string]struct {
		d    parquetdataset.Dataset[task]
		want dataset.Slice[task]
	}{
		"mapping": {
			parquetdataset.Dataset[task]{Mapping: dataset.Mapping{ID: "instance_id", Input: []string{"problem", "tests"}, Tags: []string{"repo", "difficulty"}}},
			dataset.Slice[task]{
				{ID: "django-1", Input: task{"fix it", []string{"t1", "t2"}}, Tags: map[string]string{"repo": "django", "difficulty": "2"}},
				{ID: "sympy-2", Input: task{`a b/"c" 🙂`, []string{}}, Tags: map[string]string{"repo": "sympy"}},
				{ID: "flask-3", Input: task{"p3", []string{"t"}}, Tags: map[string]string{"repo": "flask", "difficulty": "1"}},
			},
		},
		"zero mapping, unknown columns allowed": {
			parquetdataset.Dataset[task]{AllowUnknownFields: true},
			dataset.Slice[task]{
				{ID: "1", Input: task{"fix it", []string{"t1", "t2"}}},
				{ID: "2", Input: task{`a b/"c" 🙂`, []string{}}},
				{ID: "3", Input: task{"p3", []string{"t"}}},
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tc.d.Path = path
			got, err := dataset.Collect(context.Background(), tc.d)
			require.NoError(t, err)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatalf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestParquetRowsAcrossRowGroups: rows are numbered across row groups and
// read batches, and a bad row is named by its number.
func TestParquetRowsAcrossRowGroups(t *testing.T) {
	t.Parallel()
	const n, bad = 2500, 2345
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%d", i+1)
	}
	path := writeFile(t, encode(t, 700, strings1(t, "id", ids...)))
	got, err := dataset.Collect(context.Background(), parquetdataset.Dataset[string]{Path: path, Mapping: dataset.Mapping{ID: "id", Input: []string{"id"}}})
	require.NoError(t, err)
	require.Len(t, got, n)
	for i, s := range got {
		require.Equal(t, ids[i], s.ID)
		require.Equal(t, ids[i], s.Input)
	}

	ids[bad-1] = "s\n"
	path = writeFile(t, encode(t, 700, strings1(t, "id", ids...)))
	var seen int
	for _, err = range (parquetdataset.Dataset[string]{Path: path, Mapping: dataset.Mapping{ID: "id", Input: []string{"id"}}}).Samples(context.Background()) {
		if err != nil {
			break
		}
		seen++
	}
	require.Equal(t, bad-1, seen, "every row before the bad one is yielded")
	var re *dataset.RowError
	require.ErrorAs(t, err, &re)
	require.Equal(t, dataset.RowError{File: path, Row: bad, Err: re.Err}, *re)
	require.ErrorContains(t, err, fmt.Sprintf(`%s: row %d: invalid sample ID "s\n"`, path, bad))
}

func TestParquetMalformed(t *testing.T) {
	t.Parallel()
	good := encode(t, 2, fromJSON(t, sweSchema, sweRows))
	swe := dataset.Mapping{ID: "instance_id", Input: []string{"problem", "tests"}, Tags: []string{"repo"}}
	for name, tc := range map[string]struct {
		data       []byte
		mapping    dataset.Mapping
		row        int
		field, err string
		anyInput   bool // decode the input into map[string]any, not task
	}{
		"not a Parquet file":     {[]byte(`{"id":"a"}` + "\n"), swe, 0, "", "parquet", false},
		"empty file":             {nil, swe, 0, "", "parquet", false},
		"truncated":              {good[:len(good)-20], swe, 0, "", "parquet", false},
		"footer only":            {good[len(good)-200:], swe, 0, "", "", false},
		"no such column":         {good, dataset.Mapping{ID: "id", Input: []string{"problem"}}, 0, "id", "no such column", false},
		"no such tag column":     {good, dataset.Mapping{ID: "instance_id", Tags: []string{"level"}}, 0, "level", "no such column", false},
		"unknown column":         {good, dataset.Mapping{ID: "instance_id", Tags: []string{"repo"}}, 1, "", `unknown field "difficulty"`, false},
		"column T lacks":         {good, dataset.Mapping{ID: "instance_id", Input: []string{"problem", "score"}}, 1, "", `unknown field "score"`, false},
		"invalid UTF-8 in a row": {encode(t, 10, strings1(t, "id", "a", "b\xffc")), dataset.Mapping{ID: "id", Input: []string{"id"}}, 2, "id", "invalid UTF-8", true},
		"ID of the wrong type":   {good, dataset.Mapping{ID: "tests", Input: []string{"problem"}}, 1, "tests", "want a string or a number, got an array", false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, tc.data)
			var err error
			if tc.anyInput {
				err = lastErr(parquetdataset.Dataset[map[string]any]{Path: path, Mapping: tc.mapping})
			} else {
				err = lastErr(parquetdataset.Dataset[task]{Path: path, Mapping: tc.mapping})
			}
			var re *dataset.RowError
			require.ErrorAs(t, err, &re)
			require.Equal(t, path, re.File)
			require.Equal(t, tc.row, re.Row, err.Error())
			require.Equal(t, tc.field, re.Field, err.Error())
			require.ErrorContains(t, err, tc.err)
		})
	}
}

// lastErr reads d to its end and returns the error that ends it.
func lastErr[T any](d dataset.Dataset[T]) error {
	for _, err := range d.Samples(context.Background()) {
		if err != nil {
			return err
		}
	}
	return nil
}

// TestParquetNaN: Arrow marshals a NaN as the string "NaN"; a float field of
// T refuses it, naming the row and column, where a map keeps it.
func TestParquetNaN(t *testing.T) {
	t.Parallel()
	nan := fromJSON(t, arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}, {Name: "x", Type: arrow.PrimitiveTypes.Float64}}, nil), `[{"id":"a","x":1.5},{"id":"b","x":1}]`)
	nan.Column(1).(*array.Float64).Float64Values()[1] = math.NaN()
	path := writeFile(t, encode(t, 10, nan))
	m := dataset.Mapping{ID: "id", Input: []string{"x"}}

	err := lastErr(parquetdataset.Dataset[struct {
		X float64 `json:"x"`
	}]{Path: path, Mapping: m})
	var re *dataset.RowError
	require.ErrorAs(t, err, &re)
	require.Equal(t, 2, re.Row)
	require.Equal(t, "x", re.Field)

	got, err := dataset.Collect(context.Background(), parquetdataset.Dataset[map[string]any]{Path: path, Mapping: m})
	require.NoError(t, err)
	require.Equal(t, []any{1.5, "NaN"}, []any{got[0].Input["x"], got[1].Input["x"]})
}

// TestParquetReadsOnlyMappedColumns: with Input listed, other columns are
// not read, so a column the mapping does not name cannot fail a load.
func TestParquetReadsOnlyMappedColumns(t *testing.T) {
	t.Parallel()
	bad := strings1(t, "junk", "\xff", "\xfe")
	ids := strings1(t, "id", "a", "b")
	cols := []arrow.Array{ids.Column(0), bad.Column(0)}
	sc := arrow.NewSchema([]arrow.Field{ids.Schema().Field(0), bad.Schema().Field(0)}, nil)
	rec := array.NewRecordBatch(sc, cols, 2)
	defer rec.Release()
	path := writeFile(t, encode(t, 10, rec))

	got, err := dataset.Collect(context.Background(), parquetdataset.Dataset[string]{Path: path, Mapping: dataset.Mapping{ID: "id", Input: []string{"id"}}})
	require.NoError(t, err)
	require.Equal(t, dataset.Slice[string]{{ID: "a", Input: "a"}, {ID: "b", Input: "b"}}, got)

	err = lastErr(parquetdataset.Dataset[map[string]any]{Path: path, Mapping: dataset.Mapping{ID: "id"}})
	require.ErrorContains(t, err, `row 1: field "junk": invalid UTF-8`, "the whole row is read when Input is nil")
}

func TestParquetEmptyAndCancel(t *testing.T) {
	t.Parallel()
	empty := writeFile(t, encode(t, 10, strings1(t, "id")))
	got, err := dataset.Collect(context.Background(), parquetdataset.Dataset[string]{Path: empty, Mapping: dataset.Mapping{ID: "id", Input: []string{"id"}}})
	require.NoError(t, err)
	require.Empty(t, got)

	path := writeFile(t, encode(t, 10, strings1(t, "id", "a", "b", "c")))
	_, err = dataset.Collect(context.Background(), parquetdataset.Dataset[string]{Path: filepath.Join(t.TempDir(), "nope.parquet")})
	require.ErrorIs(t, err, os.ErrNotExist)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = dataset.Collect(ctx, parquetdataset.Dataset[string]{Path: path, Mapping: dataset.Mapping{ID: "id", Input: []string{"id"}}})
	require.ErrorIs(t, err, context.Canceled)

	for s, err := range (parquetdataset.Dataset[string]{Path: path, Mapping: dataset.Mapping{ID: "id", Input: []string{"id"}}}).Samples(context.Background()) {
		require.NoError(t, err)
		require.Equal(t, "a", s.ID)
		break // stopping early is not an error, and yield is not called again
	}
}
