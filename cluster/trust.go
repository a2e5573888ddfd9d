package cluster

// What a coordinator trusts of a result: nothing it cannot check. Each
// episode of a work message carries a tag, an HMAC of the episode under a
// key only the coordinator reads; a result carries its episode's tag
// back in its entry, so that a result for an episode nobody was given (or
// one a worker was never given) is refused, whoever publishes it. A result
// stored as an object carries the SHA-256 of its body, so that an object
// replaced since cannot pass as the result. And its record must be of
// this eval, with its fields in range.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"math"
	"strconv"
	"sync"

	"github.com/proctor-evals/proctor/sink"
)

// keyTagKey is the run bucket's key holding the tag key: workers may not
// read it (workerPermissions grants three other keys only).
const keyTagKey = "tag-key"

func newTagKey() []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
}

// episodeTag is the tag of (sampleID, epoch) in run runID under key.
func episodeTag(key []byte, runID, sampleID string, epoch int) string {
	return tagWith(hmac.New(sha256.New, key), runID, sampleID, epoch)
}

func tagWith(m hash.Hash, runID, sampleID string, epoch int) string {
	m.Write([]byte(runID))
	m.Write([]byte{0})
	m.Write([]byte(sampleID))
	m.Write([]byte{0})
	m.Write(strconv.AppendInt(nil, int64(epoch), 10))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// tagger makes and checks a run's tags, reusing its keyed hashes: a
// coordinator checks one for every result.
type tagger struct {
	runID string
	pool  sync.Pool // of hash.Hash, HMAC-SHA256 under the run's key
}

func newTagger(key []byte, runID string) *tagger {
	return &tagger{runID: runID, pool: sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}}
}

func (t *tagger) tag(sampleID string, epoch int) string {
	m := t.pool.Get().(hash.Hash)
	defer t.pool.Put(m)
	m.Reset()
	return tagWith(m, t.runID, sampleID, epoch)
}

func (t *tagger) valid(sampleID string, epoch int, tag string) bool {
	return hmac.Equal([]byte(tag), []byte(t.tag(sampleID, epoch)))
}

// checkRecord refuses a record that no run of evalName could have made:
// another eval's, or with a field out of range (a negative cost would
// defeat the budget; a score above 1 would inflate the mean).
func checkRecord(r *sink.Record, evalName string) error {
	bad := func(what string, v any) error {
		return fmt.Errorf("cluster: result for sample %q epoch %d: %s %v out of range", r.SampleID, r.Epoch, what, v)
	}
	unit := func(x float64) bool { return x >= 0 && x <= 1 } // NaN fails both
	switch {
	case r.Eval != evalName:
		return fmt.Errorf("cluster: result for sample %q epoch %d is of eval %q, not %q", r.SampleID, r.Epoch, r.Eval, evalName)
	case !unit(r.Score):
		return bad("score", r.Score)
	case !(r.CostUSD >= 0) || math.IsInf(r.CostUSD, 0):
		return bad("cost_usd", r.CostUSD)
	case r.InputTokens < 0:
		return bad("input_tokens", r.InputTokens)
	case r.OutputTokens < 0:
		return bad("output_tokens", r.OutputTokens)
	case !(r.DurationMS >= 0) || math.IsInf(r.DurationMS, 0):
		return bad("duration_ms", r.DurationMS)
	case !(r.Weight >= 0) || math.IsInf(r.Weight, 0):
		return bad("weight", r.Weight)
	case r.Attempt < 0:
		return bad("attempt", r.Attempt)
	}
	for name, s := range r.Scores {
		if math.IsNaN(s) || math.IsInf(s, 0) {
			return bad("scores["+strconv.Quote(name)+"]", s)
		}
	}
	return nil
}
