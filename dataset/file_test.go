package dataset_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
)

// rowError asserts that err is a *RowError at path:line (and column and
// field, when want gives them) whose message contains msg.
func rowError(t *testing.T, err error, path string, want dataset.RowError, msg string) {
	t.Helper()
	var re *dataset.RowError
	require.ErrorAs(t, err, &re)
	require.Equal(t, path, re.File)
	require.Equal(t, want.Line, re.Line, err.Error())
	require.Equal(t, want.Row, re.Row, err.Error())
	if want.Column != 0 {
		require.Equal(t, want.Column, re.Column, err.Error())
	}
	if want.Field != "" {
		require.Equal(t, want.Field, re.Field, err.Error())
	}
	require.ErrorContains(t, err, fmt.Sprintf("%s:%d", path, want.Line))
	require.ErrorContains(t, err, msg)
}

func TestJSONLMalformed(t *testing.T) {
	t.Parallel()
	long := `{"id":"a","input":{"q":"` + strings.Repeat("x", 100) + `","a":1}}`
	for name, tc := range map[string]struct {
		content string
		jsonl   dataset.JSONL[task]
		want    dataset.RowError
		msg     string
	}{
		// Each of these was accepted silently, or differently, before.
		"invalid UTF-8":          {"{\"id\":\"a\",\"input\":{\"q\":\"\xff\"}}", dataset.JSONL[task]{}, dataset.RowError{Line: 1, Column: 25}, "invalid UTF-8"},
		"two objects on a line":  {`{"id":"a","input":{"q":"x","a":1}} {"id":"b"}`, dataset.JSONL[task]{}, dataset.RowError{Line: 1}, "unexpected data after the JSON value"},
		"unknown input field":    {`{"id":"a","input":{"q":"x","answer":1}}`, dataset.JSONL[task]{}, dataset.RowError{Line: 1, Field: "input"}, `unknown field "answer"`},
		"line over MaxLineBytes": {`{"id":"z"}` + "\n" + long + "\n", dataset.JSONL[task]{MaxLineBytes: 64}, dataset.RowError{Line: 2}, "line longer than 64 bytes"},
		"BOM then syntax error":  {"\uFEFF{\"id\":\"a\",}", dataset.JSONL[task]{}, dataset.RowError{Line: 1, Column: 14}, "invalid character"},
		"BOM not at the start":   {`{"id":"a"}` + "\n\uFEFF{\"id\":\"b\"}", dataset.JSONL[task]{}, dataset.RowError{Line: 2, Column: 1}, "invalid character"},
		"null row":               {"null", dataset.JSONL[task]{}, dataset.RowError{Line: 1, Field: "id"}, "missing"},
		"array row":              {"[1]", dataset.JSONL[task]{}, dataset.RowError{Line: 1}, "cannot unmarshal array"},
		"ID with newline":        {`{"id":"a\nb"}`, dataset.JSONL[task]{}, dataset.RowError{Line: 1, Field: "id"}, `invalid sample ID "a\nb": control character U+000A at byte 1`},
		"ID with NUL":            {`{"id":"a\u0000"}`, dataset.JSONL[task]{}, dataset.RowError{Line: 1, Field: "id"}, "control character U+0000"},
		"ID with tab":            {`{"id":"\ta"}`, dataset.JSONL[task]{}, dataset.RowError{Line: 1, Field: "id"}, "control character U+0009"},
		"empty ID":               {`{"id":""}`, dataset.JSONL[task]{}, dataset.RowError{Line: 1, Field: "id"}, `invalid sample ID "": empty`},
		"ID too long":            {`{"id":"` + strings.Repeat("y", dataset.MaxIDBytes+1) + `"}`, dataset.JSONL[task]{}, dataset.RowError{Line: 1, Field: "id"}, "1025 bytes, longer than the limit of 1024"},
		"ID not a string":        {`{"id":7}`, dataset.JSONL[task]{}, dataset.RowError{Line: 1, Field: "id"}, "cannot unmarshal number"},
		"tag not a string":       {`{"id":"a","tags":{"n":1}}`, dataset.JSONL[task]{}, dataset.RowError{Line: 1, Field: "tags"}, "cannot unmarshal number"},
		"mapped row not object":  {`"x"`, dataset.JSONL[task]{Mapping: &dataset.Mapping{ID: "id"}}, dataset.RowError{Line: 1}, "cannot unmarshal string"},
		"mapped null row":        {`null`, dataset.JSONL[task]{Mapping: &dataset.Mapping{ID: "id"}}, dataset.RowError{Line: 1}, "want a JSON object"},
		"mapped ID missing":      {`{"q":"x"}`, dataset.JSONL[task]{Mapping: &dataset.Mapping{ID: "id"}}, dataset.RowError{Line: 1, Field: "id"}, "missing"},
		"mapped unknown field":   {`{"id":"a","q":"x","extra":1}`, dataset.JSONL[task]{Mapping: &dataset.Mapping{ID: "id"}}, dataset.RowError{Line: 1}, `unknown field "extra"`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tc.jsonl.Path = write(t, "d.jsonl", tc.content)
			_, err := dataset.Collect(context.Background(), tc.jsonl)
			rowError(t, err, tc.jsonl.Path, tc.want, tc.msg)
		})
	}
}

func TestJSONLAccepts(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("é", 1<<20) // 2 MiB: well over the reader's 64 KiB buffer
	weird := `a b/"c"\ü 🙂`
	for name, tc := range map[string]struct {
		content string
		jsonl   dataset.JSONL[task]
		want    dataset.Slice[task]
	}{
		"BOM at the start":     {"\uFEFF" + `{"id":"a","input":{"q":"x","a":1}}`, dataset.JSONL[task]{}, dataset.Slice[task]{{ID: "a", Input: task{"x", 1}}}},
		"CRLF lines":           {`{"id":"a"}` + "\r\n" + `{"id":"b"}` + "\r\n", dataset.JSONL[task]{}, dataset.Slice[task]{{ID: "a"}, {ID: "b"}}},
		"long line":            {`{"id":"a","input":{"q":"` + big + `"}}`, dataset.JSONL[task]{}, dataset.Slice[task]{{ID: "a", Input: task{Q: big}}}},
		"any printable ID":     {`{"id":"a b/\"c\"\\ü 🙂"}`, dataset.JSONL[task]{}, dataset.Slice[task]{{ID: weird}}},
		"ID of 1024 bytes":     {`{"id":"` + strings.Repeat("y", 1024) + `"}`, dataset.JSONL[task]{}, dataset.Slice[task]{{ID: strings.Repeat("y", 1024)}}},
		"line of MaxLineBytes": {`{"id":"a"}` + "\n" + `{"id":"bcd"}`, dataset.JSONL[task]{MaxLineBytes: len(`{"id":"bcd"}`)}, dataset.Slice[task]{{ID: "a"}, {ID: "bcd"}}},
		"unknown fields allowed": {`{"id":"a","input":{"q":"x","extra":1},"note":"n"}`, dataset.JSONL[task]{AllowUnknownFields: true},
			dataset.Slice[task]{{ID: "a", Input: task{Q: "x"}}}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tc.jsonl.Path = write(t, "d.jsonl", tc.content)
			got, err := dataset.Collect(context.Background(), tc.jsonl)
			require.NoError(t, err)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatalf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestCSVMalformed(t *testing.T) {
	t.Parallel()
	const header = "id,question,answer,level\n"
	for name, tc := range map[string]struct {
		content string
		want    dataset.RowError
		msg     string
	}{
		// A bad quote in a record's first field made FieldPos(0) panic.
		"bad quote in first field": {header + "\"a\"x,q,2,easy\n", dataset.RowError{Line: 2, Column: 3}, `extraneous or missing " in quoted-field`},
		"bare quote":               {header + "a,q\"q,2,easy\n", dataset.RowError{Line: 2, Column: 4}, `bare "`},
		"unclosed quote":           {header + "a,\"q,2,easy\n", dataset.RowError{Line: 2}, `extraneous or missing "`},
		"too few fields":           {header + "a,q,2,easy\nb,q\n", dataset.RowError{Line: 3}, "2 fields, but the header has 4"},
		"too many fields":          {header + "a,q,2,easy,x\n", dataset.RowError{Line: 2}, "5 fields, but the header has 4"},
		"invalid UTF-8":            {header + "a,q\xfe,2,easy\n", dataset.RowError{Line: 2, Column: 4, Field: "question"}, "invalid UTF-8"},
		"invalid UTF-8 in header":  {"id,qu\xffestion,answer,level\n", dataset.RowError{Line: 1, Column: 6}, "invalid UTF-8"},
		"duplicate column":         {"id,question,answer,level,level\n", dataset.RowError{Line: 1, Column: 26, Field: "level"}, "duplicate column"},
		"empty file":               {"", dataset.RowError{Line: 1}, "empty file, want a header row"},
		"bad ID":                   {header + "\"a\nb\",q,2,easy\n", dataset.RowError{Line: 2}, `invalid sample ID "a\nb"`},
		"BOM then bad quote":       {"\uFEFF" + "i\"d,question,answer,level\n", dataset.RowError{Line: 1, Column: 5}, `bare "`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := write(t, "d.csv", tc.content)
			_, err := dataset.Collect(context.Background(), dataset.CSV[task]{Path: path, Parse: parseRow})
			rowError(t, err, path, tc.want, tc.msg)
		})
	}
}

func TestCSVAccepts(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("q", 1<<20)
	for name, tc := range map[string]struct {
		content string
		want    dataset.Slice[task]
	}{
		"BOM at the start":  {"\uFEFF\"id\",question,answer,level\na,q,2,easy\n", dataset.Slice[task]{{ID: "a", Input: task{"q", 2}, Tags: map[string]string{"level": "easy"}}}},
		"long field":        {"id,question,answer,level\na,\"" + big + "\",2,easy\n", dataset.Slice[task]{{ID: "a", Input: task{big, 2}, Tags: map[string]string{"level": "easy"}}}},
		"multi-line quoted": {"id,question,answer,level\na,\"l1\nl2\",2,easy\n", dataset.Slice[task]{{ID: "a", Input: task{"l1\nl2", 2}, Tags: map[string]string{"level": "easy"}}}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := write(t, "d.csv", tc.content)
			got, err := dataset.Collect(context.Background(), dataset.CSV[task]{Path: path, Parse: parseRow})
			require.NoError(t, err)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatalf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestLoadersReportCancel: a cancelled context ends a loader with the
// context's error, never as a shorter dataset. The CSV loader used to stop
// silently.
func TestLoadersReportCancel(t *testing.T) {
	t.Parallel()
	for name, d := range map[string]dataset.Dataset[task]{
		"jsonl": dataset.JSONL[task]{Path: write(t, "d.jsonl", `{"id":"a"}`+"\n"+`{"id":"b"}`+"\n")},
		"csv":   dataset.CSV[task]{Path: write(t, "d.csv", "id,question,answer,level\na,q,1,x\nb,q,2,y\n"), Parse: parseRow},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var n int
			var err error
			for _, err = range d.Samples(ctx) {
				if err != nil {
					break
				}
				n++
				cancel()
			}
			require.Equal(t, 1, n)
			require.ErrorIs(t, err, context.Canceled)
		})
	}
}

func TestCSVNilParse(t *testing.T) {
	t.Parallel()
	_, err := dataset.Collect(context.Background(), dataset.CSV[task]{Path: write(t, "d.csv", "id\na\n")})
	require.ErrorContains(t, err, "dataset: CSV.Parse is nil")
}

func TestCheckID(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"a", "a b", `"quoted"`, "a/b\\c", "ü∂🙂", "\u00a0", " lead", strings.Repeat("y", dataset.MaxIDBytes)} {
		require.NoError(t, dataset.CheckID(id), "%q", id)
	}
	for id, want := range map[string]string{
		"":                                 `dataset: invalid sample ID "": empty`,
		"a\x00":                            `dataset: invalid sample ID "a\x00": control character U+0000 at byte 1`,
		"a\nb":                             `control character U+000A at byte 1`,
		"\r":                               `control character U+000D`,
		"a\x7f":                            `control character U+007F`,
		"a\u0085":                          `control character U+0085`,
		"\xffab":                           `dataset: invalid sample ID "\xffab": invalid UTF-8 at byte 0`,
		"ok\xc3":                           `invalid UTF-8 at byte 2`,
		strings.Repeat("z", 10<<10):        `10240 bytes, longer than the limit of 1024`,
		strings.Repeat("z", 1025) + "\x00": `1026 bytes`,
	} {
		err := dataset.CheckID(id)
		require.ErrorIs(t, err, dataset.ErrInvalidID, "%q", id)
		require.ErrorContains(t, err, want)
		require.Less(t, len(err.Error()), 300, "the message names a long ID without repeating it")
	}
}

func TestRowErrorMessage(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	for want, e := range map[string]dataset.RowError{
		"dataset: f.jsonl:3: boom":                    {File: "f.jsonl", Line: 3, Err: boom},
		"dataset: f.jsonl:3:7: boom":                  {File: "f.jsonl", Line: 3, Column: 7, Err: boom},
		`dataset: f.csv:2:4: field "q": boom`:         {File: "f.csv", Line: 2, Column: 4, Field: "q", Err: boom},
		`dataset: f.parquet: row 9: field "id": boom`: {File: "f.parquet", Row: 9, Field: "id", Err: boom},
		"dataset: f.parquet: boom":                    {File: "f.parquet", Err: boom},
	} {
		require.Equal(t, want, e.Error())
		require.ErrorIs(t, &e, boom)
	}
}
