package main

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/proctor-evals/proctor/history/catalog"
	"github.com/proctor-evals/proctor/internal/numfmt"
	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

var compactCommand = &command{
	name:  "compact",
	args:  "DIR",
	short: "drop the transcripts of old runs, keeping their records",
	long: `
Compact drops the transcripts of the runs in DIR that started before
-before, or keeps a seeded sample of them (-keep 0.1 keeps the transcripts
of one sample in ten, chosen by a hash of -seed and the sample ID: the
same samples in every run, so that their transcripts compare across
months). Records, manifests and the catalog stay: the catalog is brought up
to date first, and a record whose transcript was dropped links "compacted"
(proctor trace and the viewer say so).

Only the logs inside DIR are compacted (a catalog row of a log removed
since is not followed elsewhere); a log being written is skipped, and one
that cannot be compacted (a kept transcript missing) is reported and
skipped, the command exiting non-zero once the others are done. A store
that another log in its directory links to (a copy of the log) is kept.
Each log is compacted atomically: a crash at any moment leaves its old
state or its new one, and the next compact removes what a crash left.
Compact prints what it freed.`,
	flags: func(fs *flag.FlagSet) func([]string, io.Writer, io.Writer) (int, error) {
		before := fs.String("before", "", "compact the runs started before this `date` (2006-01-02 or RFC 3339)")
		keep := fs.Float64("keep", 0, "the `fraction` of samples whose transcripts are kept")
		seed := fs.Uint64("seed", 1, "the `seed` of the kept sample")
		return func(pos []string, stdout, stderr io.Writer) (int, error) {
			if err := wantArgs(pos, 1, 1, "a runs DIR"); err != nil {
				return 0, err
			}
			cutoff, err := parseDate(*before)
			if err != nil {
				return 0, err
			}
			if !(*keep >= 0 && *keep <= 1) {
				return 0, usageError("-keep: want a fraction in [0, 1]")
			}
			res, err := catalog.Update(pos[0])
			if err == nil {
				err = res.Unsaved // the catalog keeps what compaction drops: it must be saved first
			}
			if err != nil {
				return 0, err
			}
			// Only the logs inside DIR: a catalog row may name a log since
			// removed, whose path now leads elsewhere (a directory replaced
			// by a link).
			logs, err := catalog.Logs(pos[0])
			if err != nil {
				return 0, err
			}
			inside := map[string]bool{}
			for _, l := range logs {
				inside[l] = true
			}
			keepFn := keepSample(*keep, *seed)
			var freed int64
			compacted, failed := 0, 0
			for _, r := range res.Runs {
				if !r.Start.Before(cutoff) || !inside[r.Log] {
					continue // not old enough, or only its catalog row is left
				}
				c, err := jsonl.Compact(r.Log, keepFn)
				var locked *jsonl.LockedError
				switch {
				case errors.As(err, &locked):
					fmt.Fprintf(stderr, "warning: %s is being written: skipped\n", r.Log)
					continue
				case err != nil: // one bad log costs that log
					fmt.Fprintf(stderr, "error: %v: skipped\n", err)
					failed++
					continue
				}
				compacted++
				freed += c.Freed
				fmt.Fprintf(stdout, "%s: %d transcripts dropped, %d kept, %s freed\n", r.Log, c.Dropped, c.Kept, numfmt.Bytes(c.Freed))
			}
			if compacted > 0 {
				res, err := catalog.Update(pos[0])
				if err == nil {
					err = res.Unsaved
				}
				if err != nil {
					return 0, err
				}
			}
			fmt.Fprintf(stdout, "compacted %d runs started before %s: %s freed\n", compacted, cutoff.Format(time.RFC3339), numfmt.Bytes(freed))
			if failed > 0 {
				return 0, fmt.Errorf("%d logs could not be compacted (above): the others were", failed)
			}
			return 0, nil
		}
	},
}

func parseDate(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, usageError("-before is required: the runs started before it are compacted")
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usageError("-before: want a date (2006-01-02) or a time (RFC 3339), got %q", s)
}

// keepSample keeps the transcripts of a seeded fraction of the samples:
// SHA-256 of the seed and the sample ID, as a number in [0, 1). (FNV-1a's
// high bits hardly move between IDs that differ in their last bytes.)
func keepSample(fraction float64, seed uint64) func(*sink.Record) bool {
	if fraction <= 0 {
		return nil
	}
	return func(r *sink.Record) bool {
		h := sha256.Sum256(append(binary.LittleEndian.AppendUint64(nil, seed), r.SampleID...))
		return float64(binary.LittleEndian.Uint64(h[:])>>11)/(1<<53) < fraction
	}
}
