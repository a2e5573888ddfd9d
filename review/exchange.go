package review

import (
	"bufio"
	"cmp"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/proctor-evals/proctor/sink"
)

// Exchange with annotation tools: Export writes the queue's episodes as
// rows (CSV with a header, or JSONL) holding what a reviewer needs and
// empty grade columns; the tool fills them; Import reads the graded rows
// back as reviews. The columns, in CSV order:
//
//	sample_id, epoch, input, output, tags, judge, reviewer, pass, score, note, saw_verdict, time, run_id, eval, variant
//
// input and output are the episode's JSON, tags a JSON object, judge the
// judge's verdict (pass or fail; empty unless asked for, so that a
// reviewer grades blind), run_id and eval the episode's run and eval,
// variant its variant in a run of variants (empty otherwise; a row without
// the column is of no variant).
// Import needs sample_id and pass (true/false, pass/fail, yes/no or 1/0);
// a row whose pass is empty is not graded yet and is skipped; epoch
// defaults to 0, time to the import's, reviewer to the one given; a row of
// another run or eval than the one given is refused; other columns are
// ignored. A JSONL row has the same names, values as strings or as their
// JSON types.
//
// A CSV cell that a spreadsheet would take for a formula (one starting
// with =, +, -, @, a tab or a carriage return) is written with a ' before
// it, and so is one starting with ' itself; Import takes that ' off again,
// so that every value comes back as it was.
var columns = []string{"sample_id", "epoch", "input", "output", "tags", "judge", "reviewer", "pass", "score", "note", "saw_verdict", "time", "run_id", "eval", "variant"}

// Format is an exchange format: "csv" or "jsonl".
type Format string

const (
	CSV   Format = "csv"
	JSONL Format = "jsonl"
)

// ExportOptions tune Export.
type ExportOptions struct {
	Format      Format
	ShowVerdict bool // fill the judge column (and the rows' saw_verdict): the reviewer is not blind
}

// Export writes a row for each entry of q whose record is in records,
// in queue order.
func Export(w io.Writer, q *Queue, records []sink.Record, opts ExportOptions) error {
	byKey := make(map[Key]*sink.Record, len(records))
	for i := range records {
		byKey[Key{records[i].Variant, records[i].SampleID, records[i].Epoch}] = &records[i]
	}
	bw := bufio.NewWriter(w)
	cw := csv.NewWriter(bw)
	if opts.Format == CSV {
		cw.Write(columns)
	}
	for _, e := range q.Entries {
		r := byKey[e.Key()]
		if r == nil {
			continue
		}
		tags, _ := json.Marshal(r.Tags)
		judge, saw := "", ""
		if opts.ShowVerdict {
			judge, saw = string(r.Status), "true"
		}
		row := []string{e.SampleID, strconv.Itoa(e.Epoch), string(r.Input), string(r.Output), string(tags), judge, "", "", "", "", saw, "", r.RunID, r.Eval, e.Variant}
		switch opts.Format {
		case CSV:
			for i := range row {
				row[i] = quoteFormula(row[i])
			}
			cw.Write(row)
		case JSONL:
			obj := make(map[string]any, len(columns))
			for i, c := range columns {
				obj[c] = row[i]
			}
			obj["epoch"] = e.Epoch
			obj["input"], obj["output"], obj["tags"] = json.RawMessage(orNull(r.Input)), json.RawMessage(orNull(r.Output)), json.RawMessage(tags)
			b, err := json.Marshal(obj)
			if err != nil {
				return fmt.Errorf("review: export: %w", err)
			}
			bw.Write(append(b, '\n'))
		default:
			return fmt.Errorf("review: export format %q: want csv or jsonl", opts.Format)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("review: export: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("review: export: %w", err)
	}
	return nil
}

// quoteFormula puts a ' before a cell a spreadsheet would take for a
// formula, or that starts with ' (so that unquoteFormula knows it).
func quoteFormula(cell string) string {
	if cell != "" && strings.IndexByte(formulaStart, cell[0]) >= 0 {
		return "'" + cell
	}
	return cell
}

// unquoteFormula takes off the ' quoteFormula put before a cell.
func unquoteFormula(cell string) string {
	if len(cell) >= 2 && cell[0] == '\'' && strings.IndexByte(formulaStart, cell[1]) >= 0 {
		return cell[1:]
	}
	return cell
}

const formulaStart = "=+-@\t\r'"

func orNull(b []byte) []byte {
	if len(b) == 0 {
		return []byte("null")
	}
	return b
}

// ImportOptions tune Import.
type ImportOptions struct {
	Format   Format
	Reviewer string    // for rows without one
	Now      time.Time // for rows without a time; zero means time.Now()
	// RunID and Eval are the log's: a row naming another run or eval is
	// refused (an export of another run), a row naming none is of this
	// run. Empty checks nothing.
	RunID, Eval string
}

// Import reads graded rows from r, named path in errors, as reviews. A row
// that is not a review is a *LineError naming path and its line (for CSV,
// the line where the row starts); nothing is returned then, so that an
// import is all or nothing.
func Import(r io.Reader, path string, opts ImportOptions) ([]Review, error) {
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	var out []Review
	add := func(line int, get func(string) (string, bool)) error {
		rv, ok, err := rowReview(get, &opts)
		if err != nil {
			return &LineError{path, line, err}
		}
		if ok {
			out = append(out, rv)
		}
		return nil
	}
	switch opts.Format {
	case CSV:
		cr := csv.NewReader(r)
		cr.FieldsPerRecord = -1
		header, err := cr.Read()
		if err == io.EOF {
			return nil, nil
		}
		if err != nil {
			return nil, csvError(path, err)
		}
		col := map[string]int{}
		for i, h := range header {
			col[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
		}
		if _, ok := col["sample_id"]; !ok {
			return nil, &LineError{path, 1, errors.New("header has no sample_id column")}
		}
		if _, ok := col["pass"]; !ok {
			return nil, &LineError{path, 1, errors.New("header has no pass column")}
		}
		for {
			rec, err := cr.Read()
			if err == io.EOF {
				return out, nil
			}
			if err != nil {
				return nil, csvError(path, err)
			}
			line, _ := cr.FieldPos(0)
			err = add(line, func(name string) (string, bool) {
				i, ok := col[name]
				if !ok || i >= len(rec) {
					return "", false
				}
				return unquoteFormula(rec[i]), true
			})
			if err != nil {
				return nil, err
			}
		}
	case JSONL:
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 64<<20)
		for line := 1; sc.Scan(); line++ {
			b := sc.Bytes()
			if strings.TrimSpace(string(b)) == "" {
				continue
			}
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(b, &obj); err != nil {
				return nil, &LineError{path, line, err}
			}
			err := add(line, func(name string) (string, bool) {
				v, ok := obj[name]
				if !ok || string(v) == "null" {
					return "", ok
				}
				var s string
				if json.Unmarshal(v, &s) == nil {
					return s, true
				}
				return string(v), true
			})
			if err != nil {
				return nil, err
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("review: read %s: %w", path, err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("review: import format %q: want csv or jsonl", opts.Format)
}

func csvError(path string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &LineError{path, pe.StartLine, pe.Err}
	}
	return fmt.Errorf("review: read %s: %w", path, err)
}

// rowReview builds a review from a row's columns; ok is false for a row
// not graded yet.
func rowReview(get func(string) (string, bool), opts *ImportOptions) (rv Review, ok bool, err error) {
	val := func(name string) string {
		v, _ := get(name)
		return strings.TrimSpace(v)
	}
	pass := strings.ToLower(val("pass"))
	if pass == "" {
		return rv, false, nil
	}
	switch pass {
	case "true", "pass", "yes", "1":
		rv.Pass = true
	case "false", "fail", "no", "0":
	default:
		return rv, false, fmt.Errorf("pass %q: want true/false, pass/fail, yes/no or 1/0", pass)
	}
	rv.SampleID, _ = get("sample_id") // as it is: an ID may start or end with spaces
	rv.Variant = val("variant")       // a variant's name has no spaces
	if e := val("epoch"); e != "" {
		if rv.Epoch, err = strconv.Atoi(e); err != nil {
			return rv, false, fmt.Errorf("epoch %q is not an integer", e)
		}
	}
	rv.Reviewer = val("reviewer")
	if rv.Reviewer == "" {
		rv.Reviewer = opts.Reviewer
	}
	if s := val("score"); s != "" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return rv, false, fmt.Errorf("score %q is not a number", s)
		}
		rv.Score = &f
	}
	rv.Note = val("note")
	if s := val("saw_verdict"); s != "" {
		if rv.SawVerdict, err = strconv.ParseBool(s); err != nil {
			return rv, false, fmt.Errorf("saw_verdict %q is not true or false", s)
		}
	}
	rv.Time = opts.Now
	if s := val("time"); s != "" {
		if rv.Time, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return rv, false, fmt.Errorf("time %q is not RFC 3339", s)
		}
	}
	rv.RunID = cmp.Or(val("run_id"), opts.RunID)
	if opts.RunID != "" && rv.RunID != opts.RunID {
		return rv, false, fmt.Errorf("run_id %q: the log is run %q", rv.RunID, opts.RunID)
	}
	if e := val("eval"); opts.Eval != "" && e != "" && e != opts.Eval {
		return rv, false, fmt.Errorf("eval %q: the log is of eval %q", e, opts.Eval)
	}
	if err := rv.Validate(); err != nil {
		return rv, false, err
	}
	return rv, true, nil
}
