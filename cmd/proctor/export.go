package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/proctor-evals/proctor/sink/parquet"
)

var exportCommand = &command{
	name:  "export",
	args:  "LOG",
	short: "write a run's records as Parquet",
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
(every line sampled, so that a large seed late in the log reads).`,
	flags: func(fset *flag.FlagSet) func([]string, io.Writer, io.Writer) (int, error) {
		dir := fset.String("parquet", "", "write the Parquet files to directory `DIR` (required)")
		force := fset.Bool("force", false, "replace DIR if it holds an earlier export")
		return func(pos []string, stdout, stderr io.Writer) (int, error) {
			if err := wantArgs(pos, 1, 1, "one LOG"); err != nil {
				return 0, err
			}
			if *dir == "" {
				return 0, usageError("-parquet DIR is required")
			}
			n, err := export(pos[0], filepath.Clean(*dir), *force, stderr)
			if err != nil {
				return 0, err
			}
			fmt.Fprintf(stdout, "exported %d records to %s\n", n, *dir)
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
	w, err := parquet.New(tmp, nil)
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
