package cluster

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSpendViewNeverLosesAWorkersSpend: writes of the spend key read
// late, out of order, or refused by the compare-and-set (a stale copy of
// the others' entries) never lower what a reader knows; the reader's own
// entry is its own to count; sums saturate.
func TestSpendViewNeverLosesAWorkersSpend(t *testing.T) {
	t.Parallel()
	v := newSpendView("me")
	v.merge(map[string]spendEntry{"a": {100, 5}, "b": {30, 1}, "me": {1000, 1000}})
	v.merge(map[string]spendEntry{"a": {40, 2}, "b": {50, 1}}) // a's entry read late
	require.Equal(t, int64(150), v.tokens.Load())
	require.Equal(t, int64(6), v.nanoUSD.Load())
	require.True(t, v.exhausted(150, 0))
	require.False(t, v.exhausted(151, 0))
	require.True(t, v.exhausted(0, 6e-9))
	require.False(t, v.exhausted(0, 0), "no budget is never spent")

	v.merge(map[string]spendEntry{"c": {math.MaxInt64, math.MaxInt64}})
	require.Equal(t, int64(math.MaxInt64), v.tokens.Load(), "saturates")
}

// FuzzDecodeSpend: any value of the spend key decodes or is refused;
// what decodes has no negative figure, and merging it is idempotent and
// does not depend on the order of the values merged.
func FuzzDecodeSpend(f *testing.F) {
	f.Add([]byte(`{"h-1-abc":{"tokens":100,"nano_usd":5}}`), []byte(`{"h-1-abc":{"tokens":50,"nano_usd":9},"h-2":{"tokens":1}}`))
	f.Add([]byte(`{"x":{"tokens":-1}}`), []byte(`null`))
	f.Add([]byte(`{"x":{"tokens":9223372036854775807},"y":{"tokens":9223372036854775807}}`), []byte(`{}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ma, errA := decodeSpend(a)
		mb, errB := decodeSpend(b)
		for _, m := range []map[string]spendEntry{ma, mb} {
			for k, e := range m {
				if e.Tokens < 0 || e.NanoUSD < 0 {
					t.Fatalf("accepted a negative entry %q: %+v", k, e)
				}
			}
		}
		if errA != nil || errB != nil {
			return
		}
		ab, ba := newSpendView("h-2"), newSpendView("h-2")
		ab.merge(ma)
		ab.merge(mb)
		ab.merge(ma)
		ba.merge(mb)
		ba.merge(ma)
		if ab.tokens.Load() != ba.tokens.Load() || ab.nanoUSD.Load() != ba.nanoUSD.Load() || ab.tokens.Load() < 0 || ab.nanoUSD.Load() < 0 {
			t.Fatalf("merges differ: %d/%d and %d/%d", ab.tokens.Load(), ab.nanoUSD.Load(), ba.tokens.Load(), ba.nanoUSD.Load())
		}
		if _, err := json.Marshal(ab.entries); err != nil {
			t.Fatal(err)
		}
	})
}
