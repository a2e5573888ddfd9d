package eval

// Shards: a run split across machines without a broker (a Kubernetes
// Indexed Job, a Slurm array), each shard a run of its own on part of the
// keys, merged afterwards.

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/proctor-evals/proctor/eval/manifest"
)

// Shard is one part of a run: Index in [0, Count).
type Shard struct{ Index, Count int }

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// ParseShard parses "I/N", as the -shard flag takes it.
func ParseShard(v string) (Shard, error) {
	i, n, ok := strings.Cut(v, "/")
	idx, err1 := strconv.Atoi(i)
	count, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil || count < 1 || idx < 0 || idx >= count {
		return Shard{}, fmt.Errorf("shard %q: want I/N with 0 <= I < N", v)
	}
	return Shard{idx, count}, nil
}

// InShard reports whether the sample with this ID belongs to shard s: by an
// FNV-1a hash of the ID, so membership depends neither on the dataset's
// order nor on its other samples. Every sample is in the zero Shard.
func InShard(sampleID string, s Shard) bool {
	if s.Count <= 1 {
		return true
	}
	return fnv1a(sampleID)%uint64(s.Count) == uint64(s.Index)
}

// shardRunID derives the run ID shards share without talking to each
// other: from what the run is (eval, seed, epochs, versions, dataset), by
// manifest.RunID.
func shardRunID[T, O any](ctx context.Context, setup *runSetup[T, O]) (string, error) {
	m := newManifest(setup)
	var err error
	m.Dataset, err = setup.hashDataset(ctx)
	return manifest.RunID(m), err
}
