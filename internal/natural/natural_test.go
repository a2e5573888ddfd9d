package natural

import (
	"slices"
	"testing"
)

func TestCompare(t *testing.T) {
	got := []string{"q10", "q5", "q05", "a", "q5b", "", "q", "b2c10", "b2c9"}
	slices.SortStableFunc(got, Compare)
	want := []string{"", "a", "b2c9", "b2c10", "q", "q5", "q05", "q5b", "q10"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}
