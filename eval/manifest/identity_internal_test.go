package manifest

import (
	"math"
	"testing"
)

// TestIdentitySumCarries: the sum is modulo 2^128, the low half carrying
// into the high one (two independent 64-bit sums would not be a 128-bit
// one, and would collide more).
func TestIdentitySumCarries(t *testing.T) {
	s := IdentitySum{lo: math.MaxUint64, hi: 7}
	s.Merge(IdentitySum{lo: 2, hi: 1})
	if want := (IdentitySum{lo: 1, hi: 9}); s != want {
		t.Fatalf("got %+v, want %+v", s, want)
	}
	s = IdentitySum{lo: math.MaxUint64, hi: math.MaxUint64}
	s.Merge(IdentitySum{lo: 1})
	if s != (IdentitySum{}) {
		t.Fatalf("got %+v, want the sum to wrap to zero", s)
	}
}
