package review

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"time"

	"github.com/proctor-evals/proctor/internal/atomicfile"
	"github.com/proctor-evals/proctor/internal/safeopen"
	"github.com/proctor-evals/proctor/internal/sidecar"
	"github.com/proctor-evals/proctor/sink"
)

// Design says which episodes [Pick] draws for review. Only episodes the
// judge graded (pass or fail) are drawn: they are the population of the
// judge's pass rate.
//
// Each episode gets a random number u in [0, 1) from the seed and its key,
// fixed for the seed (permanent random numbers), so that the same design
// with a larger count picks a superset, and reviews already done stay in
// the queue.
//
// With equal weights, the Count episodes with the smallest u are picked: a
// simple random sample, each episode's inclusion probability Count/N.
// Oversampling factors weight episodes; then an episode is picked when
// u < π = min(1, c·weight), with c set so that the π sum to Count
// (Poisson sampling: the number picked is Count on average, and each π is
// exact). With StratifyBy, each value of that tag is a stratum that gets
// an equal part of the count (all of a stratum smaller than its part, the
// rest shared by the others), drawn within it as above.
//
// In a log of variants each variant is a stratum: the count is shared
// equally among the variants as it is among a tag's values (and each
// variant's part among its values of StratifyBy), so that each variant's
// estimate has its own sample with exact inclusion probabilities. u
// depends on the sample and epoch, not the variant: where the variants'
// parts are drawn alike (equal weights, equal strata), the same samples
// are picked for every variant, as the run gives every variant the same
// seeds (common random numbers).
type Design struct {
	Seed  uint64  `json:"seed"`
	Count int     `json:"count,omitempty"` // episodes to pick
	Share float64 `json:"share,omitempty"` // or this share of them (rounded up), when Count is 0

	StratifyBy string `json:"stratify_by,omitempty"` // a tag; episodes without it form a stratum of their own

	// Oversampling factors (> 1 to favour, 0 or 1 for none): an episode's
	// weight is the product of those that apply.
	Failures    float64            `json:"failures,omitempty"`    // the judge failed it: a suspected failure
	Disagreeing float64            `json:"disagreeing,omitempty"` // its judges disagreed: Scores["agreement"] < 1, as judge.Vote records
	Tags        map[string]float64 `json:"tags,omitempty"`        // "tag=value" → factor, e.g. tags where judge and people agree little
}

// Queue is what Pick drew: the episodes to review, in the order to review
// them, each with its inclusion probability.
type Queue struct {
	RunID    string    `json:"run_id"`
	Eval     string    `json:"eval,omitempty"`
	Design   Design    `json:"design"`
	Episodes int       `json:"episodes"` // pass or fail episodes in the log: the population
	Strata   []Stratum `json:"strata,omitempty"`
	Picked   time.Time `json:"picked"`
	Entries  []Entry   `json:"entries"`
}

// Stratum is one value of Design.StratifyBy, within one variant in a log
// of variants (where each variant is a stratum): its episodes and picks.
type Stratum struct {
	Variant  string `json:"variant,omitempty"`
	Value    string `json:"value"`
	Episodes int    `json:"episodes"`
	Picks    int    `json:"picks"`
}

// Entry is one picked episode.
type Entry struct {
	Variant  string  `json:"variant,omitempty"` // empty in a run of one harness
	SampleID string  `json:"sample_id"`
	Epoch    int     `json:"epoch"`
	Prob     float64 `json:"prob"` // its inclusion probability
	Stratum  string  `json:"stratum,omitempty"`
}

// Key returns the entry's episode.
func (e *Entry) Key() Key { return Key{e.Variant, e.SampleID, e.Epoch} }

// QueuePath returns the queue file of the log at log.
func QueuePath(log string) string { return sidecar.Queue(log) }

// Pick draws a queue from episodes (a run's log; episodes of one run, one
// per record). The queue is in review order: by u/π, so that reviewing
// its first part reviews a smaller random sample of the same design.
func Pick(episodes []Episode, d Design) (*Queue, error) {
	if d.Count < 0 || d.Share < 0 || d.Share > 1 || (d.Count == 0 && d.Share == 0) {
		return nil, fmt.Errorf("review: pick needs a count > 0 or a share in (0, 1], not count %d, share %v", d.Count, d.Share)
	}
	for _, f := range []float64{d.Failures, d.Disagreeing} {
		if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("review: oversampling factor %v must be finite and ≥ 0", f)
		}
	}
	for t, f := range d.Tags {
		if !(f > 0) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("review: oversampling factor %v of tag %s must be finite and > 0", f, t)
		}
	}
	q := &Queue{Design: d, Picked: time.Now().UTC()}
	type cand struct {
		Entry
		u, w float64
	}
	// variant → stratum → candidates: each variant is a stratum of its
	// own, split again by d.StratifyBy.
	strata := map[string]map[string][]cand{}
	for i := range episodes {
		r := &episodes[i]
		if r.Status != sink.Pass && r.Status != sink.Fail {
			continue
		}
		if q.RunID == "" {
			q.RunID, q.Eval = r.RunID, r.Eval
		}
		stratum := ""
		if d.StratifyBy != "" {
			stratum = r.Tags[d.StratifyBy]
		}
		c := cand{Entry: Entry{Variant: r.Variant, SampleID: r.SampleID, Epoch: r.Epoch, Stratum: stratum}, u: prn(d.Seed, r.SampleID, r.Epoch), w: weight(r, &d)}
		if strata[r.Variant] == nil {
			strata[r.Variant] = map[string][]cand{}
		}
		strata[r.Variant][stratum] = append(strata[r.Variant][stratum], c)
		q.Episodes++
	}
	_, oneHarness := strata[""]
	oneHarness = oneHarness && len(strata) == 1
	n := d.Count
	if n == 0 {
		n = int(math.Ceil(d.Share * float64(q.Episodes)))
	}
	n = min(n, q.Episodes)
	var all []cand
	order := map[Key]float64{}
	variantSizes := map[string]int{}
	for v, ss := range strata {
		for _, cs := range ss {
			variantSizes[v] += len(cs)
		}
	}
	for v, vn := range split(variantSizes, n) {
		sizes := map[string]int{}
		for s, cs := range strata[v] {
			sizes[s] = len(cs)
		}
		for s, take := range split(sizes, vn) {
			cs := strata[v][s]
			us, ws := make([]float64, len(cs)), make([]float64, len(cs))
			for j, c := range cs {
				us[j], ws[j] = c.u, c.w
			}
			picked, probs := draw(us, ws, take)
			picks := 0
			for j, c := range cs {
				if picked[j] {
					c.Prob = probs[j]
					all = append(all, c)
					order[c.Key()] = c.u / c.Prob
					picks++
				}
			}
			if d.StratifyBy != "" || !oneHarness {
				q.Strata = append(q.Strata, Stratum{Variant: v, Value: s, Episodes: len(cs), Picks: picks})
			}
		}
	}
	slices.SortFunc(all, func(a, b cand) int {
		return cmp.Or(cmp.Compare(order[a.Key()], order[b.Key()]), compareKeys(a.Key(), b.Key()))
	})
	slices.SortFunc(q.Strata, func(a, b Stratum) int {
		return cmp.Or(cmp.Compare(a.Variant, b.Variant), cmp.Compare(a.Value, b.Value))
	})
	q.Entries = make([]Entry, len(all))
	for i, c := range all {
		q.Entries[i] = c.Entry
	}
	return q, nil
}

// split shares n picks among groups of the given sizes in equal parts,
// smallest groups first: one too small to fill its part gives all it has,
// and the rest is shared by the larger ones.
func split(sizes map[string]int, n int) map[string]int {
	names := make([]string, 0, len(sizes))
	for s := range sizes {
		names = append(names, s)
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(sizes[a], sizes[b]), cmp.Compare(a, b))
	})
	out := make(map[string]int, len(names))
	left := n
	for i, s := range names {
		take := min(sizes[s], left/(len(names)-i))
		if i == len(names)-1 {
			take = min(sizes[s], left)
		}
		left -= take
		out[s] = take
	}
	return out
}

// draw returns which of the items with random numbers us and weights ws
// a sample of k picks, and their inclusion probabilities. With equal
// weights: the k smallest u, each π = k/N. Otherwise: π = min(1, c·w) with
// c such that Σπ = k, and an item is picked when u < π.
func draw(us, ws []float64, k int) (picked []bool, probs []float64) {
	picked, probs = make([]bool, len(us)), make([]float64, len(us))
	if k == 0 {
		return picked, probs
	}
	equal := true
	for _, w := range ws {
		equal = equal && w == ws[0]
	}
	if equal {
		idx := make([]int, len(us))
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(us[a], us[b]) })
		p := float64(k) / float64(len(us))
		for j, i := range idx {
			picked[i], probs[i] = j < k, p
		}
		return picked, probs
	}
	// Σ min(1, c·w) grows with c: bisect for Σ = k.
	sum := func(c float64) float64 {
		var s float64
		for _, w := range ws {
			s += min(1, c*w)
		}
		return s
	}
	lo, hi := 0.0, 1.0
	for sum(hi) < float64(k) && hi < 1e300 {
		hi *= 2
	}
	for range 200 {
		if mid := (lo + hi) / 2; sum(mid) < float64(k) {
			lo = mid
		} else {
			hi = mid
		}
	}
	for i, w := range ws {
		probs[i] = min(1, hi*w)
		picked[i] = us[i] < probs[i]
	}
	return picked, probs
}

// weight is the product of the design's oversampling factors that apply
// to r.
func weight(r *Episode, d *Design) float64 {
	w := 1.0
	if d.Failures > 0 && r.Status == sink.Fail {
		w *= d.Failures
	}
	if d.Disagreeing > 0 && r.Agreement < 1 {
		w *= d.Disagreeing
	}
	for k, v := range r.Tags {
		if f, ok := d.Tags[k+"="+v]; ok {
			w *= f
		}
	}
	return w
}

// prn is the episode's permanent random number in [0, 1) for the seed.
func prn(seed uint64, sampleID string, epoch int) float64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	h.Write([]byte(sampleID))
	binary.LittleEndian.PutUint64(b[:], uint64(epoch))
	h.Write(b[:])
	// splitmix64's finalizer spreads FNV's weak low bits.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}

// WriteQueue writes q to path whole or not at all.
func WriteQueue(path string, q *Queue) error {
	err := atomicfile.Write(path, 0o644, func(w *bufio.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(q)
	})
	if err != nil {
		return fmt.Errorf("review: writing queue: %w", err)
	}
	return nil
}

// ReadQueue reads the queue at path; a missing file is an error that
// wraps os.ErrNotExist, one that is not a regular file (a FIFO, say) one
// that wraps safeopen's ErrNotRegular, without waiting.
func ReadQueue(path string) (*Queue, error) {
	b, err := safeopen.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("review: %w", err)
	}
	var q Queue
	if err := json.Unmarshal(b, &q); err != nil {
		return nil, fmt.Errorf("review: %s: %w", path, err)
	}
	seen := map[Key]bool{}
	for i, e := range q.Entries {
		switch {
		case e.SampleID == "" || e.Epoch < 0:
			err = fmt.Errorf("entry %d has no episode", i)
		case !(e.Prob > 0 && e.Prob <= 1):
			err = fmt.Errorf("entry %d (%s) has inclusion probability %v outside (0, 1]", i, e.Key(), e.Prob)
		case seen[e.Key()]:
			err = fmt.Errorf("entry %d (%s) is in the queue twice", i, e.Key())
		}
		if err != nil {
			return nil, fmt.Errorf("review: %s: %w", path, err)
		}
		seen[e.Key()] = true
	}
	return &q, nil
}
