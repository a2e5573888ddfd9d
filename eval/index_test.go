package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"iter"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
)

func TestSampleIndex(t *testing.T) {
	ids := []string{"", "a", "b", "a"} // "" is never a sample ID, but the table need not care
	for n := range 3000 {
		ids = append(ids, "s"+strconv.Itoa(n))
	}
	x := newSampleIndex(len(ids), 0, func(i int) string { return ids[i] })
	for i := range ids {
		prev, dup := x.add(i)
		if i == 3 {
			require.True(t, dup)
			require.Equal(t, 1, prev, "a duplicate names the first position")
			continue
		}
		require.False(t, dup, ids[i])
	}
	for i, id := range ids {
		if i == 3 {
			continue
		}
		got, ok := x.get(id)
		require.True(t, ok, id)
		require.Equal(t, i, got)
		got, ok = x.getBytes([]byte(id))
		require.True(t, ok, id)
		require.Equal(t, i, got)
	}
	for _, missing := range []string{"c", "s3000", "s-1", "A"} {
		_, ok := x.get(missing)
		require.False(t, ok, missing)
		_, ok = x.getBytes([]byte(missing))
		require.False(t, ok, missing)
	}
	require.GreaterOrEqual(t, len(x.slots), 2*len(ids), "load factor at most one half")
}

func BenchmarkSampleIndexBuild1M(b *testing.B) {
	ids := make([]string, 1_000_000)
	for i := range ids {
		ids[i] = "t" + strconv.Itoa(i)
	}
	b.Run("table", func(b *testing.B) {
		for b.Loop() {
			x := newSampleIndex(len(ids), 0, func(i int) string { return ids[i] })
			for i := range ids {
				x.add(i)
			}
		}
	})
	b.Run("map", func(b *testing.B) {
		for b.Loop() {
			m := make(map[string]int, len(ids))
			for i, id := range ids {
				m[id] = i
			}
		}
	})
}

func TestFNV1aMatchesHashFNV(t *testing.T) {
	for _, s := range []string{"", "a", "task-001", "éñ\x00z", string(make([]byte, 300))} {
		h := fnv.New64a()
		h.Write([]byte(s))
		require.Equal(t, h.Sum64(), fnv1a(s), "%q", s)
	}
}

func TestInputEncoderMatchesEncodeJSON(t *testing.T) {
	type task struct {
		Prompt string
		N      float64
		M      map[string]int
	}
	var enc inputEncoder
	for _, v := range []any{nil, "a<b>&c\u2028", task{"p", 1.5, map[string]int{"b": 1, "a": 2}}, 3, []int{1}, json.RawMessage(`{"x":1}`), json.RawMessage(`{bad`), make(chan int), task{}} {
		require.Equal(t, string(encodeJSON(v)), string(enc.encode(v)), "%#v", v)
	}
}

// Goroutines adding at once: every ID lands once, and of two samples with
// one ID exactly one is indexed and the other reported as its duplicate.
func TestSampleIndexConcurrentAdds(t *testing.T) {
	const n, workers = 40_000, 8
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "s" + strconv.Itoa(i%(n-100)) // the last 100 repeat the first 100
	}
	x := newSampleIndex(n, 2, func(i int) string { return ids[i] })
	dups := make([][]int, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				if prev, dup := x.add(i); dup {
					require.Equal(t, ids[i], ids[prev])
					dups[w] = append(dups[w], i)
				}
			}
		})
	}
	wg.Wait()
	require.Len(t, slices.Concat(dups...), 100)
	for i := range n - 100 {
		got, ok := x.get(ids[i])
		require.True(t, ok)
		require.Equal(t, ids[i], ids[got])
	}
}

// A large dataset is checked on every core; a bad one gets the error the
// serial scan gives: the first bad sample, named the same way. A streamed
// dataset, whose IDs the engine keeps in one string, gets the same.
func TestCheckSamplesLargeDataset(t *testing.T) {
	n := 3 * parallelIndexMin
	mk := func() []dataset.Sample[string] {
		d := make([]dataset.Sample[string], n)
		for i := range d {
			d[i].ID = "s" + strconv.Itoa(i)
		}
		return d
	}
	for _, streamed := range []bool{false, true} {
		check := checkSamples[string]
		if streamed {
			check = func(d []dataset.Sample[string]) (*sampleTable[string], error) {
				f := dataset.Func[string](func(context.Context) iter.Seq2[dataset.Sample[string], error] {
					return dataset.Slice[string](d).Samples(context.Background())
				})
				return loadSamples(context.Background(), f, true, nil)
			}
		}
		t.Run(fmt.Sprint("streamed=", streamed), func(t *testing.T) {
			d := mk()
			tb, err := check(d)
			require.NoError(t, err)
			require.Equal(t, streamed, tb.streamed())
			require.Equal(t, n, tb.len())
			for _, i := range []int{0, 1, n / 2, n - 1} {
				got, ok := tb.index.get(d[i].ID)
				require.True(t, ok)
				require.Equal(t, i, got)
				require.Equal(t, d[i].ID, tb.id(i))
			}

			d = mk()
			d[n-1].ID = d[5].ID   // a duplicate found late…
			d[n/2].ID = d[n/3].ID // …after one found earlier
			_, err = check(d)
			require.EqualError(t, err, fmt.Sprintf("eval: duplicate sample ID %q (samples %d and %d): IDs key the log and resume", d[n/3].ID, n/3+1, n/2+1))

			d = mk()
			d[n-2].ID = ""
			d[n-1].ID = d[0].ID
			_, err = check(d)
			require.ErrorContains(t, err, fmt.Sprintf("eval: dataset sample %d:", n-1))
		})
	}
}

func BenchmarkCheckSamples1M(b *testing.B) {
	d := make([]dataset.Sample[string], 1_000_000)
	for i := range d {
		d[i].ID = "t" + strconv.Itoa(i)
	}
	for b.Loop() {
		if _, err := checkSamples(d); err != nil {
			b.Fatal(err)
		}
	}
}
