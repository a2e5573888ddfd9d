package eval

import (
	"encoding/json"
	"hash/fnv"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSampleIndex(t *testing.T) {
	ids := []string{"", "a", "b", "a"} // "" is never a sample ID, but the table need not care
	for n := range 3000 {
		ids = append(ids, "s"+strconv.Itoa(n))
	}
	x := newSampleIndex(len(ids), func(i int) string { return ids[i] })
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
			x := newSampleIndex(len(ids), func(i int) string { return ids[i] })
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
