package judgestages

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

func TestTallyRoundTrips(t *testing.T) {
	var tl Tally
	tl.Add("judge/vote[0]/a,b%c=d", true)
	tl.Add("judge/cascade.cheap", false)
	tl.Add("judge/vote[0]/a,b%c=d", false)
	s := tl.String()
	require.Equal(t, "judge/cascade.cheap=1/0,judge/vote[0]/a%2Cb%25c=d=2/1", s)
	var got []Count
	require.NoError(t, Parse(s, func(c Count) { got = append(got, c) }))
	want := []Count{{"judge/cascade.cheap", 1, 0}, {"judge/vote[0]/a,b%c=d", 2, 1}}
	require.Empty(t, cmp.Diff(want, got))
	require.NoError(t, Parse("", func(Count) { t.Fatal("no entry in an empty field") }))
}

func TestParseRefusesMalformedEntries(t *testing.T) {
	for _, s := range []string{"x", "=1/1", "a=1", "a=1/2", "a=-1/0", "a=x/0", "a%2=1/1", "a=1/1,"} {
		require.Error(t, Parse(s, func(Count) {}), s)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("judge/cascade.cheap=1/0,judge/vote[0]/a%2Cb=2/1")
	f.Fuzz(func(t *testing.T, s string) {
		var parsed []Count
		if Parse(s, func(c Count) { parsed = append(parsed, c) }) != nil {
			return
		}
		// What parses is written back to what parses the same, merged by
		// path.
		sum := map[string]Count{}
		for _, c := range parsed {
			c.Calls += sum[c.Path].Calls
			c.Verdicts += sum[c.Path].Verdicts
			sum[c.Path] = c
		}
		var tl Tally
		for _, c := range sum {
			tl = append(tl, c)
		}
		again := map[string]Count{}
		require.NoError(t, Parse(tl.String(), func(c Count) { again[c.Path] = c }))
		require.Empty(t, cmp.Diff(sum, again))
	})
}
