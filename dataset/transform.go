package dataset

import (
	"context"
	"hash/fnv"
	"iter"
	"math/rand/v2"
	"slices"
	"sort"
)

// Filter keeps the samples for which keep returns true.
func Filter[T any](d Dataset[T], keep func(Sample[T]) bool) Dataset[T] {
	return Func[T](func(ctx context.Context) iter.Seq2[Sample[T], error] {
		return func(yield func(Sample[T], error) bool) {
			for s, err := range d.Samples(ctx) {
				if err != nil || keep(s) {
					if !yield(s, err) || err != nil {
						return
					}
				}
			}
		}
	})
}

// Limit keeps the first n samples.
func Limit[T any](d Dataset[T], n int) Dataset[T] {
	return Func[T](func(ctx context.Context) iter.Seq2[Sample[T], error] {
		return func(yield func(Sample[T], error) bool) {
			if n <= 0 {
				return
			}
			i := 0
			for s, err := range d.Samples(ctx) {
				if !yield(s, err) || err != nil {
					return
				}
				if i++; i == n {
					return
				}
			}
		}
	})
}

// Shuffle yields the samples in an order fixed by seed. It reads the whole
// dataset into memory.
func Shuffle[T any](d Dataset[T], seed uint64) Dataset[T] {
	return Func[T](func(ctx context.Context) iter.Seq2[Sample[T], error] {
		return func(yield func(Sample[T], error) bool) {
			all, err := Collect(ctx, d)
			if err != nil {
				yield(Sample[T]{}, err)
				return
			}
			r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
			r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
			for _, s := range all {
				if !yield(s, nil) {
					return
				}
			}
		}
	})
}

// Stratified keeps at most perStratum samples of each value of tag (samples
// without the tag form their own stratum), chosen by seed, so that a small
// subset keeps the dataset's mix. Samples keep their original relative order.
func Stratified[T any](d Dataset[T], tag string, perStratum int, seed uint64) Dataset[T] {
	return Func[T](func(ctx context.Context) iter.Seq2[Sample[T], error] {
		return func(yield func(Sample[T], error) bool) {
			all, err := Collect(ctx, d)
			if err != nil {
				yield(Sample[T]{}, err)
				return
			}
			strata := map[string][]int{}
			for i, s := range all {
				strata[s.Tags[tag]] = append(strata[s.Tags[tag]], i)
			}
			names := make([]string, 0, len(strata))
			for k := range strata {
				names = append(names, k)
			}
			sort.Strings(names)
			r := rand.New(rand.NewPCG(seed, 0x2545f4914f6cdd1d))
			var keep []int
			for _, k := range names {
				idx := strata[k]
				r.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
				keep = append(keep, idx[:min(perStratum, len(idx))]...)
			}
			slices.Sort(keep)
			for _, i := range keep {
				if !yield(all[i], nil) {
					return
				}
			}
		}
	})
}

// Shard keeps the samples whose ID hashes to shard index of count (0 ≤ index
// < count), so that count independent processes (for example the pods of a
// Kubernetes Indexed Job) split a dataset without coordination. The split
// depends only on IDs, not on order.
func Shard[T any](d Dataset[T], index, count int) Dataset[T] {
	return Filter(d, func(s Sample[T]) bool {
		h := fnv.New64a()
		h.Write([]byte(s.ID))
		return count > 0 && int(h.Sum64()%uint64(count)) == index
	})
}
