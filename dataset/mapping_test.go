package dataset_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
)

func row(t *testing.T, s string) dataset.Row {
	t.Helper()
	var r dataset.Row
	require.NoError(t, json.Unmarshal([]byte(s), &r))
	return r
}

func TestFromRow(t *testing.T) {
	t.Parallel()
	const swe = `{"instance_id":"django-1","repo":"django","difficulty":3,"hard":true,"meta":{"a": [1, 2]},"none":null,"q":"fix it","a":7}`
	for name, tc := range map[string]struct {
		m            dataset.Mapping
		row          string
		allowUnknown bool
		want         dataset.Sample[task]
		field, err   string // a *RowError naming field, with message err
	}{
		"fields": {m: dataset.Mapping{ID: "instance_id", Input: []string{"q", "a"}, Tags: []string{"repo", "difficulty", "hard", "meta", "none"}}, row: swe,
			want: dataset.Sample[task]{ID: "django-1", Input: task{"fix it", 7}, Tags: map[string]string{"repo": "django", "difficulty": "3", "hard": "true", "meta": `{"a":[1,2]}`}}},
		"numeric ID": {m: dataset.Mapping{ID: "n"}, row: `{"n":1234567890123456789,"q":"x"}`,
			want: dataset.Sample[task]{ID: "1234567890123456789", Input: task{Q: "x"}}},
		"row number as ID": {m: dataset.Mapping{}, row: `{"q":"x","a":1}`, want: dataset.Sample[task]{ID: "5", Input: task{"x", 1}}},
		"rest of the row is the input": {m: dataset.Mapping{ID: "id", Tags: []string{"t"}}, row: `{"id":"i","t":"v","q":"x"}`,
			want: dataset.Sample[task]{ID: "i", Input: task{Q: "x"}, Tags: map[string]string{"t": "v"}}},
		"unknown fields allowed": {m: dataset.Mapping{ID: "instance_id"}, row: swe, allowUnknown: true,
			want: dataset.Sample[task]{ID: "django-1", Input: task{"fix it", 7}}},

		"unknown field":           {m: dataset.Mapping{ID: "instance_id"}, row: swe, err: `unknown field "difficulty"`},
		"listed field T lacks":    {m: dataset.Mapping{ID: "instance_id", Input: []string{"q", "repo"}}, row: swe, allowUnknown: true, err: `unknown field "repo"`},
		"missing ID field":        {m: dataset.Mapping{ID: "id"}, row: swe, field: "id", err: "missing"},
		"missing input field":     {m: dataset.Mapping{ID: "instance_id", Input: []string{"question"}}, row: swe, field: "question", err: "missing"},
		"missing tag field":       {m: dataset.Mapping{ID: "instance_id", Tags: []string{"level"}}, row: swe, field: "level", err: "missing"},
		"ID of the wrong type":    {m: dataset.Mapping{ID: "meta"}, row: swe, field: "meta", err: "want a string or a number, got an object"},
		"null ID":                 {m: dataset.Mapping{ID: "none"}, row: swe, field: "none", err: "want a string or a number, got null"},
		"bad ID":                  {m: dataset.Mapping{ID: "q"}, row: `{"q":"a\tb"}`, err: `invalid sample ID "a\tb"`},
		"input of the wrong type": {m: dataset.Mapping{ID: "instance_id", Input: []string{"a"}}, row: `{"instance_id":"x","a":"seven"}`, field: "a", err: "cannot unmarshal string"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := dataset.FromRow[task](tc.m, row(t, tc.row), 5, tc.allowUnknown)
			if tc.err != "" {
				var re *dataset.RowError
				require.ErrorAs(t, err, &re)
				require.Equal(t, tc.field, re.Field)
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatalf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestFromRowSingleField: when T is not a struct or a map, one Input field
// is the input itself.
func TestFromRowSingleField(t *testing.T) {
	t.Parallel()
	s, err := dataset.FromRow[string](dataset.Mapping{ID: "id", Input: []string{"question"}}, row(t, `{"id":"1","question":"2+2?","answer":"4"}`), 1, false)
	require.NoError(t, err)
	require.Equal(t, dataset.Sample[string]{ID: "1", Input: "2+2?"}, s)

	n, err := dataset.FromRow[[]int](dataset.Mapping{Input: []string{"xs"}}, row(t, `{"xs":[1,2]}`), 3, false)
	require.NoError(t, err)
	require.Equal(t, dataset.Sample[[]int]{ID: "3", Input: []int{1, 2}}, n)
}

func TestJSONLMappingRowNumbers(t *testing.T) {
	t.Parallel()
	path := write(t, "d.jsonl", `{"q":"a"}`+"\n\n"+`{"q":"b"}`+"\n")
	got, err := dataset.Collect(context.Background(), dataset.JSONL[task]{Path: path, Mapping: &dataset.Mapping{}})
	require.NoError(t, err)
	require.Equal(t, dataset.Slice[task]{{ID: "1", Input: task{Q: "a"}}, {ID: "2", Input: task{Q: "b"}}}, got, "rows are numbered, blank lines are not rows")
}

// A JSONL file in a benchmark's own shape loads without rewriting it.
func ExampleMapping() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "swe.jsonl")
	os.WriteFile(path, []byte(`{"instance_id":"django__django-11099","repo":"django/django","problem_statement":"UsernameValidator allows a trailing newline","difficulty":2}
{"instance_id":"sympy__sympy-20590","repo":"sympy/sympy","problem_statement":"Symbol instances have __dict__","difficulty":1}
`), 0o644)

	type Task struct {
		Problem string `json:"problem_statement"`
	}
	d := dataset.JSONL[Task]{Path: path, Mapping: &dataset.Mapping{
		ID:    "instance_id",
		Input: []string{"problem_statement"},
		Tags:  []string{"repo", "difficulty"},
	}}
	for s, err := range d.Samples(context.Background()) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s %v %q\n", s.ID, s.Tags, s.Input.Problem)
	}
	// Output:
	// django__django-11099 map[difficulty:2 repo:django/django] "UsernameValidator allows a trailing newline"
	// sympy__sympy-20590 map[difficulty:1 repo:sympy/sympy] "Symbol instances have __dict__"
}
