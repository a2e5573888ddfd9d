package eval

import (
	"context"
	"iter"
	"reflect"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
)

func streamedInts(t *testing.T, n int) *sampleTable[int] {
	t.Helper()
	d := make(dataset.Slice[int], n)
	for i := range d {
		d[i] = dataset.Sample[int]{ID: "s" + strconv.Itoa(i), Input: i * 10}
	}
	stream := dataset.Func[int](func(ctx context.Context) iter.Seq2[dataset.Sample[int], error] { return d.Samples(ctx) })
	tb, err := loadSamples(context.Background(), stream, true, nil)
	require.NoError(t, err)
	require.True(t, tb.streamed())
	require.Equal(t, "s3", tb.id(3))
	return tb
}

func (st *sampleStream[T]) heldCount() int {
	n := len(st.overflow)
	for i := range st.ring {
		if st.ring[i].Load() != nil {
			n++
		}
	}
	return n
}

// A streamed sample is held from the reading that reaches it to the
// settling of its last pending episode; a sample with nothing pending is
// read past and not held.
func TestSampleStreamHoldsASampleUntilItsLastEpisode(t *testing.T) {
	tb := streamedInts(t, 5)
	pending := []int{2, 0, 1, 2, 2} // sample 1: every epoch done already
	st := newSampleStream(context.Background(), tb, func(i int) int { return pending[i] }, 4)
	defer st.close()

	h3, err := st.get(3) // a worker claimed sample 3 before others claimed 0 and 2
	require.NoError(t, err)
	require.Equal(t, 30, h3.s.Input)
	require.Equal(t, 5, st.read, "read ahead, to the end")
	require.Equal(t, 4, st.heldCount(), "0, 2, 3 and 4 are held; 1 was read past")

	h0, err := st.get(0)
	require.NoError(t, err)
	require.Equal(t, 0, h0.s.Input)
	st.settled(h0)
	require.Equal(t, 4, st.heldCount(), "one of sample 0's two episodes is left")
	st.settled(h0)
	require.Equal(t, 3, st.heldCount())
	h2, _ := st.get(2)
	st.settled(h2)
	st.settled(h3)
	st.settled(h3)
	h4, _ := st.get(4)
	st.settled(h4)
	st.settled(h4)
	require.Zero(t, st.heldCount())

	_, err = st.get(1)
	require.ErrorContains(t, err, "sample 2 claimed with no episode pending")
}

// A sample still held when its ring slot comes round again (a hung
// episode) does not lose its place: the later sample goes to the overflow
// map, is found there and let go of from there.
func TestSampleStreamOverflow(t *testing.T) {
	const n = 1200
	tb := streamedInts(t, n)
	st := newSampleStream(context.Background(), tb, func(int) int { return 1 }, 4)
	defer st.close()
	size := len(st.ring)
	require.Less(t, 2*size, n)

	hung, err := st.get(0)
	require.NoError(t, err)
	for i := 1; i < n; i++ {
		h, err := st.get(i)
		require.NoError(t, err)
		require.Equal(t, i*10, h.s.Input)
		if i%size == 0 {
			require.Contains(t, st.overflow, i, "slot %d holds the hung sample", i%size)
		}
		st.settled(h)
	}
	require.Empty(t, st.overflow)
	require.Equal(t, 1, st.heldCount())
	st.settled(hung)
	require.Zero(t, st.heldCount())
}

// A worker's stream reads a sample when its work arrives, skips the
// samples between, holds it until its episodes settle (more work for a
// held sample adds to its count), and reads the dataset again from its
// start for work behind the reading; a sample let go of and held again
// is not lost to its old place.
func TestFedStreamHoldsTheWorkersSamplesOnly(t *testing.T) {
	const n = 2000
	d := make(dataset.Slice[int], n)
	for i := range d {
		d[i] = dataset.Sample[int]{ID: "s" + strconv.Itoa(i), Input: i * 10}
	}
	reads := 0
	stream := dataset.Func[int](func(ctx context.Context) iter.Seq2[dataset.Sample[int], error] {
		reads++
		return d.Samples(ctx)
	})
	tb, err := loadSamples(context.Background(), stream, true, nil)
	require.NoError(t, err)
	st := newFedStream(context.Background(), tb, 4)
	defer st.close()

	require.NoError(t, st.hold(10, 2))
	require.NoError(t, st.hold(1500, 1))
	require.Equal(t, 2, st.heldCount(), "the samples between are read past, not held")
	require.NoError(t, st.hold(10, 1))
	h10, err := st.get(10)
	require.NoError(t, err)
	require.Equal(t, 100, h10.s.Input)
	for range 3 {
		st.settled(h10)
	}
	_, err = st.get(10)
	require.ErrorContains(t, err, "claimed before it was held")
	require.Equal(t, 2, reads, "one reading to index, one to run")

	require.NoError(t, st.hold(10, 1), "work behind the reading")
	require.Equal(t, 3, reads)
	h10, err = st.get(10)
	require.NoError(t, err)
	require.Equal(t, 100, h10.s.Input)
	h1500, err := st.get(1500)
	require.NoError(t, err, "held across the new reading")
	st.settled(h1500)
	st.settled(h10)
	require.Zero(t, st.heldCount())

	// Held in the overflow map (its ring slot taken), let go of, held again
	// while the old one settles: the new one stays.
	size := len(st.ring)
	require.NoError(t, st.hold(20, 1))
	require.NoError(t, st.hold(20+size, 1))
	old, err := st.get(20 + size)
	require.NoError(t, err)
	require.Contains(t, st.overflow, 20+size)
	old.left.Store(0)                       // its last episode settling: let go of ...
	require.NoError(t, st.hold(20+size, 1)) // ... and held again, before settled removes it
	renewed, err := st.get(20 + size)
	require.NoError(t, err)
	require.NotSame(t, old, renewed)
	old.left.Store(1)
	st.settled(old)
	got, err := st.get(20 + size)
	require.NoError(t, err)
	require.Same(t, renewed, got, "letting go of the old one kept the new one")

	// Work in another order (a sequential gate's): past fedRereads
	// readings for work behind, the dataset is read into memory once.
	require.Equal(t, 4, reads)
	require.NoError(t, st.hold(5, 1))
	require.Equal(t, 5, reads)
	for _, i := range []int{3, 1999, 1, 0} {
		require.NoError(t, st.hold(i, 1))
		h, err := st.get(i)
		require.NoError(t, err)
		require.Equal(t, i*10, h.s.Input)
	}
	require.Equal(t, 5, reads, "no reading more")
}

// A streamed dataset's tags are kept once per distinct set: samples with
// equal tags share one map, whatever order their keys were written in.
func TestStreamedTagsAreInterned(t *testing.T) {
	d := make(dataset.Slice[int], 3000)
	for i := range d {
		d[i] = dataset.Sample[int]{ID: "s" + strconv.Itoa(i)}
		if i%4 != 0 {
			d[i].Tags = map[string]string{"level": []string{"easy", "hard", "x"}[i%3], "repo": "r" + strconv.Itoa(i%2)}
		}
	}
	stream := dataset.Func[int](func(ctx context.Context) iter.Seq2[dataset.Sample[int], error] { return d.Samples(ctx) })
	tb, err := loadSamples(context.Background(), stream, true, nil)
	require.NoError(t, err)
	maps := map[uintptr]bool{}
	for i := range d {
		require.Equal(t, d[i].Tags, tb.tagsOf(i), "sample %d", i)
		if m := tb.tagsOf(i); m != nil {
			maps[reflect.ValueOf(m).Pointer()] = true
		}
	}
	require.Len(t, maps, 6, "3 levels × 2 repos")
}
