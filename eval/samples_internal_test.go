package eval

import (
	"context"
	"iter"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
)

// A streamed sample is held from the reading that reaches it to the
// settling of its last pending episode; a sample with nothing pending is
// read past and not held.
func TestSampleStreamHoldsASampleUntilItsLastEpisode(t *testing.T) {
	d := make(dataset.Slice[int], 5)
	for i := range d {
		d[i] = dataset.Sample[int]{ID: "s" + strconv.Itoa(i), Input: i * 10}
	}
	stream := dataset.Func[int](func(ctx context.Context) iter.Seq2[dataset.Sample[int], error] { return d.Samples(ctx) })
	tb, err := loadSamples(context.Background(), stream, true)
	require.NoError(t, err)
	require.True(t, tb.streamed())
	require.Equal(t, "s3", tb.id(3))

	pending := []int{2, 0, 1, 2, 2} // sample 1: every epoch done already
	st := newSampleStream(context.Background(), tb, func(i int) int { return pending[i] })
	defer st.close()

	s3, err := st.get(3) // a worker claimed sample 3 before others claimed 0 and 2
	require.NoError(t, err)
	require.Equal(t, 30, s3.Input)
	require.Equal(t, 4, st.read)
	require.Len(t, st.held, 3, "0, 2 and 3 are held; 1 was read past")

	s0, err := st.get(0)
	require.NoError(t, err)
	require.Equal(t, 0, s0.Input)
	st.settled(0)
	require.Contains(t, st.held, 0, "one of sample 0's two episodes is left")
	st.settled(0)
	require.NotContains(t, st.held, 0)
	st.settled(2)
	require.NotContains(t, st.held, 2)
	st.settled(3)
	st.settled(3)
	require.Empty(t, st.held)

	_, err = st.get(1)
	require.ErrorContains(t, err, "sample 2 claimed with no episode pending")
}
