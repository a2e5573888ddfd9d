package review_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/review"
	"github.com/proctor-evals/proctor/sink"
)

func exchangeLog() ([]sink.Record, *review.Queue) {
	recs := []sink.Record{
		{RunID: "r", SampleID: "a", Status: sink.Pass, Input: json.RawMessage(`{"q":"2+2"}`), Output: json.RawMessage(`"4"`), Tags: map[string]string{"k": "x"}},
		{RunID: "r", SampleID: "b", Epoch: 1, Status: sink.Fail, Input: json.RawMessage(`"say \"hi\", twice"`), Output: json.RawMessage(`"hi"`)},
		{RunID: "r", SampleID: "c", Status: sink.Pass},
	}
	q := &review.Queue{RunID: "r", Entries: []review.Entry{{SampleID: "b", Epoch: 1, Prob: 0.5}, {SampleID: "a", Prob: 0.5}}}
	return recs, q
}

// TestExportFillImport is the round trip through an annotation tool:
// export the queue, fill the grade columns, import the reviews.
func TestExportFillImport(t *testing.T) {
	t.Parallel()
	recs, q := exchangeLog()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t.Run("csv", func(t *testing.T) {
		t.Parallel()
		var buf bytes.Buffer
		require.NoError(t, review.Export(&buf, q, recs, review.ExportOptions{Format: review.CSV}))
		rows, err := csv.NewReader(&buf).ReadAll()
		require.NoError(t, err)
		require.Len(t, rows, 3)
		assert.Equal(t, []string{"sample_id", "epoch", "input", "output", "tags", "judge", "reviewer", "pass", "score", "note", "saw_verdict", "time", "run_id", "eval", "variant"}, rows[0])
		assert.Equal(t, []string{"b", "1", `"say \"hi\", twice"`, `"hi"`, "null", "", "", "", "", "", "", "", "r", "", ""}, rows[1], "queue order, blind")
		rows[1][7], rows[1][9] = "pass", "polite, enough"
		rows[2][6], rows[2][7], rows[2][8] = "zoe", "0", "0.2"
		var out bytes.Buffer
		csv.NewWriter(&out).WriteAll(rows)
		got, err := review.Import(&out, "graded.csv", review.ImportOptions{Format: review.CSV, Reviewer: "ana", Now: now})
		require.NoError(t, err)
		score := 0.2
		assert.Equal(t, []review.Review{
			{SampleID: "b", Epoch: 1, Reviewer: "ana", Time: now, Pass: true, Note: "polite, enough", RunID: "r"},
			{SampleID: "a", Reviewer: "zoe", Time: now, Pass: false, Score: &score, RunID: "r"},
		}, got)
	})
	t.Run("jsonl", func(t *testing.T) {
		t.Parallel()
		var buf bytes.Buffer
		require.NoError(t, review.Export(&buf, q, recs, review.ExportOptions{Format: review.JSONL, ShowVerdict: true}))
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		require.Len(t, lines, 2)
		var row map[string]any
		require.NoError(t, json.Unmarshal([]byte(lines[1]), &row))
		assert.Equal(t, map[string]any{"q": "2+2"}, row["input"])
		assert.Equal(t, "pass", row["judge"])
		assert.Equal(t, float64(0), row["epoch"])
		graded := `{"sample_id":"a","epoch":0,"pass":true,"reviewer":"bo","saw_verdict":true,"time":"2026-11-25T10:00:00Z","score":1}` + "\n\n" +
			`{"sample_id":"b","epoch":"1","pass":""}` + "\n"
		got, err := review.Import(strings.NewReader(graded), "g.jsonl", review.ImportOptions{Format: review.JSONL, Now: now})
		require.NoError(t, err)
		require.Len(t, got, 1, "an ungraded row is skipped")
		assert.Equal(t, "bo", got[0].Reviewer)
		assert.True(t, got[0].SawVerdict)
		assert.Equal(t, 1.0, *got[0].Score)
		assert.Equal(t, time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC), got[0].Time)
	})
}

// TestExchangeKeepsEveryValue: a sample ID with spaces around it comes back
// as it was, and a CSV cell a spreadsheet would run as a formula is
// written with a ' before it, which Import takes off.
func TestExchangeKeepsEveryValue(t *testing.T) {
	t.Parallel()
	ids := []string{" lead", "trail ", "=HYPERLINK(\"http://x\")", "+1", "-2", "@SUM(A1)", "\tx", "'quoted", "'=both", "plain"}
	var recs []sink.Record
	q := &review.Queue{RunID: "r"}
	for _, id := range ids {
		recs = append(recs, sink.Record{RunID: "r", SampleID: id, Status: sink.Pass, Output: json.RawMessage(`"=1+1"`)})
		q.Entries = append(q.Entries, review.Entry{SampleID: id, Prob: 1})
	}
	for _, format := range []review.Format{review.CSV, review.JSONL} {
		var buf bytes.Buffer
		require.NoError(t, review.Export(&buf, q, recs, review.ExportOptions{Format: format}))
		if format == review.CSV {
			rows, err := csv.NewReader(bytes.NewReader(buf.Bytes())).ReadAll()
			require.NoError(t, err)
			for _, row := range rows[1:] {
				for i, cell := range row {
					if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
						t.Errorf("row %q: cell %d %q would run as a formula", row[0], i, cell)
					}
				}
			}
		}
		graded := strings.ReplaceAll(buf.String(), `"pass":""`, `"pass":"yes"`)
		if format == review.CSV {
			rows, err := csv.NewReader(&buf).ReadAll()
			require.NoError(t, err)
			for _, row := range rows[1:] {
				row[7] = "yes"
			}
			var out bytes.Buffer
			csv.NewWriter(&out).WriteAll(rows)
			graded = out.String()
		}
		got, err := review.Import(strings.NewReader(graded), "g", review.ImportOptions{Format: format, Reviewer: "ana"})
		require.NoError(t, err, format)
		var back []string
		for _, r := range got {
			back = append(back, r.SampleID)
		}
		if d := cmp.Diff(ids, back); d != "" {
			t.Errorf("%s: sample IDs (-exported +imported):\n%s", format, d)
		}
	}
}

// TestImportRefusesAnotherRun: rows of another run or eval than the log's
// are refused; rows naming none are of the log's run.
func TestImportRefusesAnotherRun(t *testing.T) {
	t.Parallel()
	opts := review.ImportOptions{Format: review.CSV, Reviewer: "ana", RunID: "r1", Eval: "e1"}
	for in, want := range map[string]string{
		"sample_id,pass,run_id,eval\na,yes,r2,e1\n": `run_id "r2"`,
		"sample_id,pass,run_id,eval\na,yes,r1,e2\n": `eval "e2"`,
	} {
		_, err := review.Import(strings.NewReader(in), "g.csv", opts)
		var le *review.LineError
		require.ErrorAs(t, err, &le, in)
		require.ErrorContains(t, err, want)
	}
	got, err := review.Import(strings.NewReader("sample_id,pass\na,yes\n"), "g.csv", opts)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "r1", got[0].RunID)
}

// TestImportNamesFileAndLine: a row that is not a review fails the whole
// import with its file and line.
func TestImportNamesFileAndLine(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		format review.Format
		in     string
		line   int
		msg    string
	}{
		"csv pass":        {review.CSV, "sample_id,pass\na,true\nb,maybe\n", 3, `pass "maybe"`},
		"csv quoted":      {review.CSV, "sample_id,pass,note\na,true,\"multi\nline\"\nb,x,y\n", 4, `pass "x"`},
		"csv no reviewer": {review.CSV, "sample_id,pass,reviewer\na,true,\n", 2, "no reviewer"},
		"csv header":      {review.CSV, "id,pass\n", 1, "no sample_id"},
		"csv bare quote":  {review.CSV, "sample_id,pass\na\"b,true\n", 2, "bare"},
		"csv epoch":       {review.CSV, "sample_id,pass,epoch,reviewer\na,1,one,x\n", 2, "epoch"},
		"csv score":       {review.CSV, "sample_id,pass,score,reviewer\na,1,1.5,x\n", 2, "score 1.5"},
		"jsonl syntax":    {review.JSONL, `{"sample_id":"a","pass":true,"reviewer":"x"}` + "\n{oops\n", 2, "invalid"},
		"jsonl time":      {review.JSONL, `{"sample_id":"a","pass":true,"reviewer":"x","time":"yesterday"}`, 1, "RFC 3339"},
		"jsonl no sample": {review.JSONL, `{"pass":false,"reviewer":"x"}`, 1, "no sample_id"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			reviewer := ""
			if !strings.Contains(name, "reviewer") {
				reviewer = "ana"
			}
			_, err := review.Import(strings.NewReader(tc.in), "in.file", review.ImportOptions{Format: tc.format, Reviewer: reviewer})
			var le *review.LineError
			require.True(t, errors.As(err, &le), "%v", err)
			assert.Equal(t, "in.file", le.Path)
			assert.Equal(t, tc.line, le.Line)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

// FuzzImportCSV: any input is reviews or a clear error, never a panic,
// and every review it returns is valid.
func FuzzImportCSV(f *testing.F) {
	f.Add("sample_id,pass,reviewer\na,true,x\n")
	f.Add("sample_id,epoch,pass,score,note,saw_verdict,time\na,2,fail,0.5,\"n,\n\",true,2026-01-01T00:00:00Z\n")
	f.Add("\ufeffsample_id,pass\n\"a\"\"b\",1\n")
	f.Add("sample_id,epoch,pass,run_id,eval,variant\na,0,pass,r,ev,gpt-5/base\na,0,fail,r,ev,'+x\n")
	f.Fuzz(func(t *testing.T, in string) {
		fuzzImport(t, in, review.CSV)
	})
}

// FuzzImportJSONL is FuzzImportCSV for JSONL rows.
func FuzzImportJSONL(f *testing.F) {
	f.Add(`{"sample_id":"a","pass":true,"reviewer":"x","epoch":1,"score":0.5}`)
	f.Add(`{"sample_id":"a","pass":"fail","epoch":"3","time":"2026-01-01T00:00:00Z","saw_verdict":"true"}` + "\n{}")
	f.Add(`{"sample_id":"a","epoch":0,"pass":true,"variant":"a"}` + "\n" + `{"sample_id":"a","epoch":0,"pass":false,"variant":"b"}` + "\n" + `{"sample_id":"a","pass":1,"variant":null}`)
	f.Fuzz(func(t *testing.T, in string) {
		fuzzImport(t, in, review.JSONL)
	})
}

func fuzzImport(t *testing.T, in string, format review.Format) {
	got, err := review.Import(strings.NewReader(in), "fuzz", review.ImportOptions{Format: format, Reviewer: "f"})
	if err != nil {
		if !strings.HasPrefix(err.Error(), "review: ") {
			t.Fatalf("error without the package prefix: %v", err)
		}
		return
	}
	for _, r := range got {
		if err := r.Validate(); err != nil {
			t.Fatalf("invalid review %+v: %v", r, err)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back review.Review
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("a review does not read back: %v", err)
		}
		if back.Key() != r.Key() {
			t.Fatalf("review of %s reads back as one of %s", r.Key(), back.Key())
		}
	}
}

// FuzzReadReviews: a review file is reviews, a torn tail, or an error
// naming its line; a torn tail starts at a line boundary.
func FuzzReadReviews(f *testing.F) {
	good := `{"review":1,"sample_id":"a","epoch":0,"reviewer":"ana","time":"2026-11-25T12:00:00Z","pass":true,"saw_verdict":false}` + "\n"
	f.Add(good)
	f.Add(good + `{"review":1,"sam`)
	f.Add(good + "x\n" + good)
	f.Add(`{"review":1,"variant":"gpt-5/plan","sample_id":"a","epoch":0,"reviewer":"ana","time":"2026-11-25T12:00:00Z","pass":true,"saw_verdict":false}` + "\n" + good)
	path := f.TempDir() + "/r.jsonl"
	f.Fuzz(func(t *testing.T, in string) {
		if err := writeFile(path, in); err != nil {
			t.Fatal(err)
		}
		got, torn, err := review.Read(path)
		if err != nil {
			var le *review.LineError
			if !errors.As(err, &le) || le.Line < 1 {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		if torn != nil && torn.Offset > 0 && in[torn.Offset-1] != '\n' {
			t.Fatalf("torn tail at %d is not at a line start", torn.Offset)
		}
		for _, r := range got {
			if err := r.Validate(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
