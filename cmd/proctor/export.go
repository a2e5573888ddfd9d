package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/proctor-evals/proctor/internal/atomicfile"
	"github.com/proctor-evals/proctor/internal/safeopen"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/sink/parquetsink"
)

var exportCommand = &command{
	name:  "export",
	args:  "LOG",
	short: "write a run's records as Parquet, or its failures as a dataset",
	long: `
Export writes the records of LOG (a JSONL log, or Parquet) as a directory
of Parquet files, DIR, for DuckDB, pandas, polars or Spark.

The output appears whole or not at all: the files are written into a
temporary directory beside DIR, renamed to DIR only once every record is
written, and removed if anything fails (a corrupt line in the log, a full
disk). An existing DIR is an error unless -force is given; even then, only
a directory of Parquet part files (an earlier export) is replaced, never
one holding anything else.

In DuckDB: SELECT tags['difficulty'], output->>'answer' FROM 'DIR/*.parquet'.
A log loads too: SELECT * FROM read_json_auto('LOG', sample_size = -1)
(every line sampled, so that a large seed late in the log reads).

With -failures -format dataset -o OUT, export writes the samples whose
episodes failed as a dataset file instead, ready to add to a suite:

	proctor export -failures -format dataset -o regressions.jsonl runs/online-2026-11-23T10-1h.jsonl

OUT is JSON Lines, one sample per line, {"id", "input", "tags", "trace"},
which dataset.JSONL loads (into the eval's input type: replay.Case for a
run over production traces, which keeps the trace and span IDs of the
recorded operation). transcript links the failing episode's transcript (an
absolute PATH#OFFSET that 'proctor trace' prints; empty when the run kept
none). A sample appears once however many of its epochs failed, with the
input and tags of its first failing record; an episode's last record in
the log is the one that counts. -status chooses the statuses exported
(default fail); unscored never includes the episodes an asymmetric-sampling
judge left out of its sample (error kind not_sampled). OUT is written
whole or not at all; an existing OUT is an error unless -force is given,
and even then only a file an earlier export wrote is replaced.`,
	flags: func(fset *flag.FlagSet) func([]string, io.Writer, io.Writer) (int, error) {
		dir := fset.String("parquet", "", "write the Parquet files to directory `DIR`")
		force := fset.Bool("force", false, "replace DIR or OUT if it holds an earlier export")
		failures := fset.Bool("failures", false, "export the failing samples as a dataset (with -format dataset and -o)")
		format := fset.String("format", "", "with -failures, the output `format`: dataset (the default)")
		statuses := fset.String("status", "fail", "with -failures, the `statuses` exported, comma-separated: fail, error, unscored")
		out := fset.String("o", "", "with -failures, write the dataset to file `OUT`")
		return func(pos []string, stdout, stderr io.Writer) (int, error) {
			if err := wantArgs(pos, 1, 1, "one LOG"); err != nil {
				return 0, err
			}
			if !*failures {
				switch {
				case *format != "" || *out != "":
					return 0, usageError("-format and -o go with -failures")
				case *dir == "":
					return 0, usageError("-parquet DIR (or -failures) is required")
				}
				n, err := export(pos[0], filepath.Clean(*dir), *force, stderr)
				if err != nil {
					return 0, err
				}
				fmt.Fprintf(stdout, "exported %d records to %s\n", n, *dir)
				return 0, nil
			}
			switch {
			case *dir != "":
				return 0, usageError("-parquet and -failures do not go together")
			case *format != "" && *format != "dataset":
				return 0, usageError("-format %q: -failures writes only the dataset format", *format)
			case *out == "":
				return 0, usageError("-o OUT is required with -failures")
			}
			want, err := parseStatuses(*statuses)
			if err != nil {
				return 0, err
			}
			n, err := exportFailures(pos[0], filepath.Clean(*out), want, *force, stderr)
			if err != nil {
				return 0, err
			}
			fmt.Fprintf(stdout, "exported %d samples to %s\n", n, *out)
			return 0, nil
		}
	},
}

// export writes the records of src as Parquet into dir, atomically: into a
// temporary directory beside dir, renamed to dir once complete.
func export(src, dir string, force bool, stderr io.Writer) (n int, err error) {
	seq, err := records(src, stderr)
	if err != nil {
		return 0, err
	}
	replace := false
	switch st, err := os.Lstat(dir); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return 0, err
	case !force:
		return 0, fmt.Errorf("%s already exists (-force replaces an earlier export)", dir)
	case !st.IsDir():
		return 0, fmt.Errorf("%s exists and is not a directory: not replacing it", dir)
	default:
		if err := onlyParts(dir); err != nil {
			return 0, err
		}
		replace = true
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return 0, err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	w, err := parquetsink.New(tmp, nil)
	if err != nil {
		return 0, err
	}
	ctx := context.Background()
	for r, rerr := range seq {
		if rerr == nil {
			rerr = w.Write(ctx, r)
		}
		if rerr != nil {
			w.Close(ctx)
			return 0, rerr
		}
		n++
	}
	if err := w.Close(ctx); err != nil {
		return 0, err
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp makes it 0700
		return 0, err
	}
	if !replace {
		return n, os.Rename(tmp, dir)
	}
	// A directory cannot be renamed over a non-empty one: move the old one
	// aside, put the new one in place, then remove the old one.
	old, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".old-")
	if err != nil {
		return 0, err
	}
	aside := filepath.Join(old, "export")
	if err := os.Rename(dir, aside); err != nil {
		os.Remove(old)
		return 0, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.Rename(aside, dir)
		os.Remove(old)
		return 0, err
	}
	return n, os.RemoveAll(old)
}

// onlyParts fails unless dir holds nothing but Parquet part files (and
// their .tmp files), as an export leaves: -force replaces an earlier
// export, never a directory of someone's other files.
func onlyParts(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(name, "part-") || !(strings.HasSuffix(name, ".parquet") || strings.HasSuffix(name, ".parquet.tmp")) {
			return fmt.Errorf("%s holds %s, which is not an export's: not replacing it", dir, name)
		}
	}
	return nil
}

// parseStatuses parses -status: a comma-separated list of fail, error and
// unscored.
func parseStatuses(list string) (map[sink.Status]bool, error) {
	want := make(map[sink.Status]bool)
	for s := range strings.SplitSeq(list, ",") {
		switch st := sink.Status(strings.TrimSpace(s)); st {
		case sink.Fail, sink.Error, sink.Unscored:
			want[st] = true
		case "":
		default:
			return nil, usageError("-status %q: want fail, error or unscored, comma-separated", s)
		}
	}
	if len(want) == 0 {
		return nil, usageError("-status is empty: want fail, error or unscored, comma-separated")
	}
	return want, nil
}

// datasetLine is a line of an exported dataset: dataset.JSONL's shape,
// with the link to the episode the sample failed in.
type datasetLine struct {
	ID         string            `json:"id"`
	Input      json.RawMessage   `json:"input,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
	Transcript string            `json:"trace"`
}

// exportFailures writes the samples of src with an episode whose final
// record has a status in want to out as dataset JSONL, atomically: into a
// temporary file beside out, renamed to out once complete.
//
// It reads src twice, keeping O(episodes) keys in memory, not records: the
// first pass finds each episode's last record (the one that counts, as in
// the report), the second writes the first selected one of each sample.
func exportFailures(src, out string, want map[sink.Status]bool, force bool, stderr io.Writer) (n int, err error) {
	selected := func(r *sink.Record) bool {
		return want[r.Status] && !(r.Status == sink.Unscored && r.ErrorKind == sink.KindNotSampled)
	}
	seq, err := records(src, stderr)
	if err != nil {
		return 0, err
	}
	last := make(map[sink.Key]int) // the index of each episode's last record
	i := 0
	for r, err := range seq {
		if err != nil {
			return 0, err
		}
		last[r.Key()] = i
		i++
	}
	switch _, err := os.Lstat(out); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return 0, err
	case !force:
		return 0, fmt.Errorf("%s already exists (-force replaces an earlier export)", out)
	default:
		if err := onlyExportedDataset(out); err != nil {
			return 0, err
		}
	}
	// A relative transcript link is relative to the log; the dataset lives
	// elsewhere, so links are made absolute (what 'proctor trace LINK' reads).
	resolveLinks := false
	if st, err := os.Stat(src); err == nil && !st.IsDir() && !strings.HasSuffix(src, ".parquet") {
		resolveLinks = true
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return 0, err
	}
	seq, err = records(src, io.Discard) // a torn tail was reported by the first pass
	if err != nil {
		return 0, err
	}
	err = atomicfile.Write(out, 0o644, func(w *bufio.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		written := make(map[string]struct{})
		i := 0
		for r, err := range seq {
			if err != nil {
				return err
			}
			idx := i
			i++
			if last[r.Key()] != idx || !selected(&r) {
				continue
			}
			if _, dup := written[r.SampleID]; dup {
				continue
			}
			written[r.SampleID] = struct{}{}
			line := datasetLine{ID: r.SampleID, Input: r.Input, Tags: r.Tags, Transcript: r.Transcript}
			if resolveLinks && r.Transcript != "" {
				if path, off, err := jsonl.ResolveTranscript(src, r.Transcript); err == nil {
					if abs, err := filepath.Abs(path); err == nil {
						line.Transcript = jsonl.TranscriptLink{Path: abs, Offset: off}.String()
					}
				}
			}
			if err := enc.Encode(line); err != nil {
				return fmt.Errorf("sample %q: %w", r.SampleID, err)
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// onlyExportedDataset fails unless the file at path is one that
// exportFailures writes: a regular file whose every line is an object of
// the fields id, input, tags and trace, with id and trace present. -force
// replaces an earlier export, never someone's own dataset (which has no
// trace field). An empty file holds nothing to lose and is replaced.
func onlyExportedDataset(path string) error {
	st, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s exists and is not a regular file: not replacing it", path)
	}
	f, err := safeopen.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	notOurs := func(line int, why string) error {
		return fmt.Errorf("%s is not an earlier export (line %d: %s): not replacing it", path, line, why)
	}
	r := bufio.NewReader(f)
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(b)) > 0 {
			var fields map[string]json.RawMessage
			if json.Unmarshal(b, &fields) != nil {
				return notOurs(line, "not a JSON object")
			}
			for k := range fields {
				switch k {
				case "id", "input", "tags", "trace":
				default:
					return notOurs(line, fmt.Sprintf("field %q", k))
				}
			}
			if _, ok := fields["id"]; !ok {
				return notOurs(line, `no "id"`)
			}
			if _, ok := fields["trace"]; !ok {
				return notOurs(line, `no "trace"`)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
