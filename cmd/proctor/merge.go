package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

var mergeCommand = &command{
	name:  "merge",
	args:  "LOG...",
	short: "merge the shard logs of one run into one log",
	long: `
Merge writes the records of the LOGs, the logs of the shards of one run
(eval.Config.Shard, -shard I/N, a Kubernetes Indexed Job), into one log,
OUT, whose report is the report of the whole run.

OUT holds one record per episode (sample, epoch): of several, a record
that is not an error is kept over an error record, and otherwise the first
in the order the LOGs are given; the others are counted as duplicates
dropped, and each that differs from the one kept in status or score (two
final results of one episode: a conflict) is warned about on stderr.
Files among the LOGs that are the transcript store, manifest or lock of
a log that exists (what runs/*.jsonl matches) are skipped, with a note. Records are written by sample ID (digits compared by value), then
by epoch, so that the same shards merge to the same bytes in any order.
Each record's transcript is copied into OUT's transcript store
(OUT.traces.jsonl) and its transcript link rewritten to it.

Merge refuses logs of different runs: logs whose manifests differ in run
ID, eval, seed, epochs, component versions or dataset, or whose records
carry different run IDs. It refuses a log another process is still
writing (a shard still running). A torn tail (a shard killed in the middle
of a write) is reported and left out. OUT's manifest is the run's, without
a shard.

OUT is written whole or not at all (temporary files renamed into place).
An existing OUT is an error unless -force is given; even then, only a
proctor log (an earlier merge) is replaced.`,
	flags: func(fset *flag.FlagSet) func([]string, io.Writer, io.Writer) (int, error) {
		out := fset.String("o", "", "write the merged log to `OUT` (required)")
		force := fset.Bool("force", false, "replace OUT if it is a proctor log")
		return func(pos []string, stdout, stderr io.Writer) (int, error) {
			if err := wantArgs(pos, 1, -1, "at least one LOG"); err != nil {
				return 0, err
			}
			if *out == "" {
				return 0, usageError("-o OUT is required")
			}
			pos, err := logArgs(pos, stderr)
			if err != nil {
				return 0, err
			}
			return 0, merge(*out, pos, *force, stdout, stderr)
		}
	},
}

// merge checks that logs are of one run, merges them into out and writes
// out's manifest.
func merge(out string, logs []string, force bool, stdout, stderr io.Writer) error {
	merged, err := checkOneRun(logs, stderr)
	if err != nil {
		return err
	}
	res, err := jsonl.Merge(out, logs, &jsonl.MergeOptions{Force: force})
	if err != nil {
		return err
	}
	for _, t := range res.Torn {
		fmt.Fprintf(stderr, "warning: %v: left out (the shard was stopped in the middle of a write)\n", t)
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if merged != nil {
		if merged.RunID == "" {
			merged.RunID = res.RunID
		}
		if err := manifest.Write(out, merged); err != nil {
			return err
		}
	} else if err := os.Remove(manifest.Path(out)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		// -force replaced a log whose manifest does not describe this one.
		return err
	}
	runID := res.RunID
	if runID == "" && merged != nil {
		runID = merged.RunID
	}
	fmt.Fprintf(stdout, "merged %d logs of run %s into %s: %d records, %d duplicates dropped\n",
		len(logs), runID, out, res.Records, res.Duplicates)
	return nil
}

// checkOneRun reads the manifest of each log and fails unless they are
// of one run, naming two logs and what differs; it also checks each log's
// records against its manifest's run ID. It returns the merged log's
// manifest: the run's, without a shard; nil when no log has one.
func checkOneRun(logs []string, stderr io.Writer) (*manifest.Manifest, error) {
	type read struct {
		log string
		m   *manifest.Manifest
	}
	var ms []read
	var without []string
	for _, log := range logs {
		if _, err := os.Stat(log); err != nil {
			return nil, err
		}
		m, err := manifest.Read(log)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			without = append(without, log)
			continue
		case err != nil:
			return nil, err
		}
		if m.RunID != "" {
			if id, err := firstRunID(log); err != nil {
				return nil, err
			} else if id != "" && id != m.RunID {
				return nil, fmt.Errorf("%s holds records of run %q but its manifest (%s) names run %q", log, id, manifest.Path(log), m.RunID)
			}
		}
		ms = append(ms, read{log, m})
	}
	if len(without) > 0 {
		fmt.Fprintf(stderr, "warning: no manifest beside %s: only run IDs are checked for it\n", strings.Join(without, ", "))
	}
	if len(ms) == 0 {
		return nil, nil
	}
	first := ms[0]
	for _, r := range ms[1:] {
		if d := manifest.SameRun(first.m, r.m); len(d) > 0 {
			var what []string
			for _, x := range d {
				what = append(what, fmt.Sprintf("%s %q in %s, %q in %s", x.Field, x.A, first.log, x.B, r.log))
			}
			return nil, fmt.Errorf("%s and %s are not logs of one run: %s", first.log, r.log, strings.Join(what, "; "))
		}
	}
	warnShards(ms, func(r read) string { return r.m.Shard }, func(r read) string { return r.log }, stderr)

	// The merged manifest does not depend on the order of the logs: the
	// earliest created is its base, and the dataset hash any shard that
	// finished computed.
	base := slices.MinFunc(ms, func(a, b read) int {
		return cmp.Or(a.m.CreatedAt.Compare(b.m.CreatedAt), strings.Compare(a.m.Shard, b.m.Shard))
	})
	m := *base.m
	m.Shard = ""
	for _, r := range ms {
		if m.Dataset.Hash == "" {
			m.Dataset = r.m.Dataset
		}
	}
	return &m, nil
}

// firstRunID is the run ID of the first record of the log; "" for a log
// without records.
func firstRunID(log string) (string, error) {
	for r, err := range jsonl.Records(log) {
		var torn *jsonl.TornTailError
		if errors.As(err, &torn) {
			return "", nil
		}
		return r.RunID, err
	}
	return "", nil
}

// warnShards warns when the logs are shards of a run (their manifests
// name "I/N") and some shard is missing or given twice: the merge is then
// not the whole run, or holds duplicates.
func warnShards[R any](rs []R, shard, log func(R) string, stderr io.Writer) {
	count := 0
	seen := map[int][]string{}
	for _, r := range rs {
		var i, n int
		if _, err := fmt.Sscanf(shard(r), "%d/%d", &i, &n); err != nil || n < 1 {
			return // not all shards: a whole run and a rerun, say
		}
		if count != 0 && n != count {
			fmt.Fprintf(stderr, "warning: the logs are shards of different splits (%d and %d shards)\n", count, n)
			return
		}
		count = n
		seen[i] = append(seen[i], log(r))
	}
	var missing []string
	for i := range count {
		switch logs := seen[i]; {
		case len(logs) == 0:
			missing = append(missing, fmt.Sprintf("%d/%d", i, count))
		case len(logs) > 1:
			fmt.Fprintf(stderr, "warning: shard %d/%d is given twice (%s): one record per episode is kept\n", i, count, strings.Join(logs, ", "))
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(stderr, "warning: shards %s are missing: the merged log is not the whole run\n", strings.Join(missing, ", "))
	}
}
