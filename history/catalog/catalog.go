// Package catalog keeps a queryable catalog of the runs in a directory:
// one row per log (a run, or a shard of one) in catalog/runs.parquet and
// one per log × tag value in catalog/tags.parquet, beside the runs, for
// DuckDB, pandas and polars:
//
//	SELECT eval, date_trunc('week', started_at) AS week, avg(pass_rate), sum(cost_usd)
//	FROM 'runs/catalog/runs.parquet' GROUP BY ALL ORDER BY week;
//
// [Update] brings the catalog up to date incrementally. A row is keyed by
// its log's path (relative to the directory) and identified by the log's
// size and modification time and its manifest's modification time: a log
// whose identity is unchanged is not read again, so an update reads only
// the logs added or changed since the last (a resumed or compacted run).
// Hashing the log would prove it unchanged, but only by reading it all,
// which is what the catalog is there to avoid; a log is append-only or
// replaced by a rename, and either changes its size or its time. A log
// still being written (its writer holds the lock) is skipped and keeps
// its earlier row, if any, until it is finished. The rows of logs
// removed since stay: the catalog is the aggregate that outlives the logs.
//
// Each file is written atomically (a temporary file renamed over it), the
// tags before the runs. The catalog links Arrow's Parquet writer, not
// pqarrow (which links gRPC); the rows it holds are history.Run's.
package catalog

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/history"
	"github.com/proctor-evals/proctor/internal/sidecar"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// Schema is the version of the catalog's columns. A catalog of another
// version is built again from the logs.
const Schema = 5

// Where the catalog of a runs directory lives: Dir under it.
const (
	Dir      = "catalog"
	RunsFile = "runs.parquet"
	TagsFile = "tags.parquet"
)

// entry is a row of runs.parquet: a run and its log's identity.
type entry struct {
	history.Run
	WallMS          float64
	LogSize         int64
	LogModTime      time.Time
	ManifestModTime time.Time // zero for a log without a manifest
	CatalogedAt     time.Time
}

// tagEntry is a row of tags.parquet: a run's tag value, with the run's
// key and start so that a query needs no join for a trend.
type tagEntry struct {
	RunID, Eval, Variant, Log string
	Start                     time.Time
	history.Tag
}

// The columns, in file order. Usage is the records' totals, then the
// judge's part of them (Schema 2) and a simulated user's (Schema 3): rows
// kept from before are read again rather than left at zero; resources and
// image_digests are the manifest's, each list joined by "; " (Schema 3).
// A log of an eval's variants has a row per variant, variant naming it
// (Schema 4). episode_resources is the distinct resources the records name,
// joined by "; " (Schema 5).
var runFields = []field[entry]{
	str("run_id", func(e *entry) *string { return &e.RunID }),
	str("eval", func(e *entry) *string { return &e.Eval }),
	str("variant", func(e *entry) *string { return &e.Variant }),
	str("log", func(e *entry) *string { return &e.Log }),
	str("shard", func(e *entry) *string { return &e.Shard }),
	timestamp("started_at", func(e *entry) *time.Time { return &e.Start }),
	float("wall_ms", func(e *entry) *float64 { return &e.WallMS }),
	str("harness_version", func(e *entry) *string { return &e.HarnessVersion }),
	str("judge_version", func(e *entry) *string { return &e.JudgeVersion }),
	str("sandbox_version", func(e *entry) *string { return &e.SandboxVersion }),
	integer("dataset_samples", func(e *entry) *int { return &e.DatasetSamples }),
	str("dataset_hash", func(e *entry) *string { return &e.DatasetHash }),
	str("seed", func(e *entry) *string { return &e.Seed }),
	integer("epochs", func(e *entry) *int { return &e.Epochs }),
	str("proctor_version", func(e *entry) *string { return &e.Proctor }),
	str("resources", func(e *entry) *string { return &e.Resources }),
	str("image_digests", func(e *entry) *string { return &e.ImageDigests }),
	str("episode_resources", func(e *entry) *string { return &e.EpisodeResources }),
	integer("samples", func(e *entry) *int { return &e.Samples }),
	integer("episodes", func(e *entry) *int { return &e.Episodes }),
	integer("passed", func(e *entry) *int { return &e.Passed }),
	integer("failed", func(e *entry) *int { return &e.Failed }),
	integer("errored", func(e *entry) *int { return &e.Errored }),
	integer("unscored", func(e *entry) *int { return &e.Unscored }),
	float("pass_rate", func(e *entry) *float64 { return &e.PassRate }),
	float("ci_lo", func(e *entry) *float64 { return &e.Lo }),
	float("ci_hi", func(e *entry) *float64 { return &e.Hi }),
	str("ci_method", func(e *entry) *string { return &e.Method }),
	float("mean_score", func(e *entry) *float64 { return &e.MeanScore }),
	float("latency_p50_ms", func(e *entry) *float64 { return &e.LatencyP50MS }),
	float("latency_p95_ms", func(e *entry) *float64 { return &e.LatencyP95MS }),
	integer("input_tokens", func(e *entry) *int64 { return &e.InputTokens }),
	integer("output_tokens", func(e *entry) *int64 { return &e.OutputTokens }),
	float("cost_usd", func(e *entry) *float64 { return &e.CostUSD }),
	integer("judge_input_tokens", func(e *entry) *int64 { return &e.JudgeInputTokens }),
	integer("judge_output_tokens", func(e *entry) *int64 { return &e.JudgeOutputTokens }),
	float("judge_cost_usd", func(e *entry) *float64 { return &e.JudgeCostUSD }),
	integer("simulator_input_tokens", func(e *entry) *int64 { return &e.SimulatorInputTokens }),
	integer("simulator_output_tokens", func(e *entry) *int64 { return &e.SimulatorOutputTokens }),
	float("simulator_cost_usd", func(e *entry) *float64 { return &e.SimulatorCostUSD }),
	integer("log_size", func(e *entry) *int64 { return &e.LogSize }),
	timestamp("log_mtime", func(e *entry) *time.Time { return &e.LogModTime }),
	timestamp("manifest_mtime", func(e *entry) *time.Time { return &e.ManifestModTime }),
	timestamp("cataloged_at", func(e *entry) *time.Time { return &e.CatalogedAt }),
}

var tagFields = []field[tagEntry]{
	str("run_id", func(e *tagEntry) *string { return &e.RunID }),
	str("eval", func(e *tagEntry) *string { return &e.Eval }),
	str("variant", func(e *tagEntry) *string { return &e.Variant }),
	str("log", func(e *tagEntry) *string { return &e.Log }),
	timestamp("started_at", func(e *tagEntry) *time.Time { return &e.Start }),
	str("tag", func(e *tagEntry) *string { return &e.Tag.Tag }),
	str("value", func(e *tagEntry) *string { return &e.Value }),
	integer("samples", func(e *tagEntry) *int { return &e.Samples }),
	integer("episodes", func(e *tagEntry) *int { return &e.Episodes }),
	integer("passed", func(e *tagEntry) *int { return &e.Passed }),
	integer("failed", func(e *tagEntry) *int { return &e.Failed }),
	integer("errored", func(e *tagEntry) *int { return &e.Errored }),
	integer("unscored", func(e *tagEntry) *int { return &e.Unscored }),
	float("pass_rate", func(e *tagEntry) *float64 { return &e.PassRate }),
	float("ci_lo", func(e *tagEntry) *float64 { return &e.Lo }),
	float("ci_hi", func(e *tagEntry) *float64 { return &e.Hi }),
}

// Result is what an Update did.
type Result struct {
	// Runs are every row of the catalog after the update, in history
	// order (history.Sort), with Log joined to the directory.
	Runs []*history.Run
	// Read counts the logs read (added or changed), Kept the rows whose
	// log was unchanged and not read.
	Read, Kept int
	// Busy names the logs skipped because a run is writing them.
	Busy []string
	// Errors are the logs that could not be read: skipped, their earlier
	// rows (if any) kept.
	Errors []error
	// Unsaved is why the catalog could not be written (a read-only runs
	// directory): Runs are the rows all the same, read again next time.
	Unsaved error
}

// Update brings the catalog of the runs directory dir up to date: it
// reads the logs (*.jsonl, two levels deep, as the viewer finds them)
// added or changed since the catalog was last written, and writes it
// again if anything changed.
func Update(dir string) (*Result, error) {
	old, oldTags, err := read(dir)
	if err != nil {
		return nil, err
	}
	byLog := map[string][]entry{} // a row per variant
	for i := range old {
		byLog[old[i].Log] = append(byLog[old[i].Log], old[i])
	}
	tagsByLog := map[string][]tagEntry{}
	for _, t := range oldTags {
		tagsByLog[t.Log] = append(tagsByLog[t.Log], t)
	}
	logs, err := Logs(dir)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	changed := false
	now := time.Now().UTC()
	for _, path := range logs {
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		id, err := identify(path)
		if err != nil {
			res.Errors = append(res.Errors, err)
			continue
		}
		if es := byLog[rel]; len(es) > 0 && es[0].LogSize == id.LogSize && es[0].LogModTime.Equal(id.LogModTime) && es[0].ManifestModTime.Equal(id.ManifestModTime) {
			res.Kept++
			continue
		}
		if err := jsonl.InUse(path); err != nil {
			res.Busy = append(res.Busy, path)
			continue
		}
		rows, err := history.ReadVariants(path, nil)
		var notLog *jsonl.NotLogError
		switch {
		case errors.As(err, &notLog):
			continue // a dataset or another JSONL file among the runs
		case err != nil:
			res.Errors = append(res.Errors, err)
			continue
		case rows[0].Eval == "":
			continue // an empty file without a manifest: no run yet
		}
		byLog[rel] = nil
		tagsByLog[rel] = nil
		for _, run := range rows {
			run.Log = rel
			run.Start = run.Start.Truncate(time.Microsecond) // as the file keeps it
			e := id
			e.Run, e.WallMS, e.CatalogedAt = *run, float64(run.Wall)/float64(time.Millisecond), now
			byLog[rel] = append(byLog[rel], e)
			for _, t := range run.Tags {
				tagsByLog[rel] = append(tagsByLog[rel], tagEntry{RunID: run.RunID, Eval: run.Eval, Variant: run.Variant, Log: rel, Start: run.Start, Tag: t})
			}
		}
		res.Read++
		changed = true
	}
	entries := make([]entry, 0, len(byLog))
	for _, es := range byLog {
		entries = append(entries, es...)
	}
	slices.SortFunc(entries, func(a, b entry) int {
		return cmp.Or(cmp.Compare(a.Eval, b.Eval), cmp.Compare(a.Variant, b.Variant), a.Start.Compare(b.Start), cmp.Compare(a.Log, b.Log))
	})
	var tags []tagEntry
	for log, ts := range tagsByLog {
		if len(byLog[log]) > 0 {
			tags = append(tags, ts...)
		}
	}
	slices.SortStableFunc(tags, func(a, b tagEntry) int {
		return cmp.Or(cmp.Compare(a.Eval, b.Eval), cmp.Compare(a.Variant, b.Variant), a.Start.Compare(b.Start), cmp.Compare(a.Log, b.Log))
	})
	if changed {
		res.Unsaved = write(dir, entries, tags)
	}
	res.Runs = runs(dir, entries, tags)
	return res, nil
}

// write writes the catalog's two tables, the tags first.
func write(dir string, entries []entry, tags []tagEntry) error {
	if err := os.MkdirAll(filepath.Join(dir, Dir), 0o755); err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	if err := writeTable(filepath.Join(dir, Dir, TagsFile), tagFields, tags); err != nil {
		return err
	}
	return writeTable(filepath.Join(dir, Dir, RunsFile), runFields, entries)
}

// Read returns the catalog's rows, in history order, with Log joined to
// dir, without reading a log. A directory without a catalog has none.
func Read(dir string) ([]*history.Run, error) {
	entries, tags, err := read(dir)
	if err != nil {
		return nil, err
	}
	return runs(dir, entries, tags), nil
}

func runs(dir string, entries []entry, tags []tagEntry) []*history.Run {
	byRow := map[[2]string][]history.Tag{} // by log and variant
	for _, t := range tags {
		byRow[[2]string{t.Log, t.Variant}] = append(byRow[[2]string{t.Log, t.Variant}], t.Tag)
	}
	out := make([]*history.Run, len(entries))
	for i := range entries {
		r := entries[i].Run
		r.Tags = byRow[[2]string{r.Log, r.Variant}]
		r.Wall = time.Duration(entries[i].WallMS * float64(time.Millisecond))
		r.Log = filepath.Join(dir, filepath.FromSlash(r.Log))
		out[i] = &r
	}
	history.Sort(out)
	return out
}

// read reads the catalog's two tables. A missing catalog, or one of
// another Schema, is empty (the logs are read again); a file that is not
// a catalog is an error, and is never replaced.
func read(dir string) ([]entry, []tagEntry, error) {
	entries, err := readTable(filepath.Join(dir, Dir, RunsFile), runFields)
	if err == nil {
		var tags []tagEntry
		tags, err = readTable(filepath.Join(dir, Dir, TagsFile), tagFields)
		if err == nil {
			return entries, tags, nil
		}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, errOtherVersion):
		return nil, nil, nil
	case errors.Is(err, errNotCatalog):
		return nil, nil, fmt.Errorf("%w: not replacing it", err)
	}
	return nil, nil, err
}

// identify stats a log and its manifest: the identity its row keeps.
func identify(path string) (entry, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return entry{}, fmt.Errorf("catalog: %w", err)
	}
	e := entry{LogSize: fi.Size(), LogModTime: fi.ModTime().UTC().Truncate(time.Microsecond)}
	if mi, err := os.Stat(manifest.Path(path)); err == nil {
		e.ManifestModTime = mi.ModTime().UTC().Truncate(time.Microsecond)
	}
	return e, nil
}

// Logs lists the logs in dir and its subdirectories (one level, not
// hidden ones nor the catalog's), as the viewer finds them: *.jsonl but
// transcript stores.
func Logs(dir string) ([]string, error) {
	var logs []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == dir {
				return err
			}
			return nil
		}
		if d.IsDir() {
			if path == dir {
				return nil
			}
			rel, _ := filepath.Rel(dir, path)
			if strings.HasPrefix(d.Name(), ".") || rel == Dir || strings.ContainsRune(rel, filepath.Separator) {
				return filepath.SkipDir
			}
			return nil
		}
		if _, _, beside := sidecar.LogOf(path); d.Type().IsRegular() && strings.HasSuffix(path, ".jsonl") && !beside {
			logs = append(logs, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	return logs, nil
}
