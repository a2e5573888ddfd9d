package usage_test

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/proctor-evals/proctor/usage"
)

func TestAddSumsEveryCountAndKeepsTheLastModel(t *testing.T) {
	t.Parallel()
	a := usage.Usage{InputTokens: 10, OutputTokens: 2, CacheReadTokens: 4, CacheWriteTokens: 3, ReasoningTokens: 1, CostUSD: 0.5, Model: "a"}
	b := usage.Usage{InputTokens: 1, OutputTokens: 20, CacheReadTokens: 1, CacheWriteTokens: 1, ReasoningTokens: 7, CostUSD: 0.25}
	want := usage.Usage{InputTokens: 11, OutputTokens: 22, CacheReadTokens: 5, CacheWriteTokens: 4, ReasoningTokens: 8, CostUSD: 0.75, Model: "a"}
	if d := cmp.Diff(want, a.Add(b)); d != "" {
		t.Errorf("Add (-want +got):\n%s", d)
	}
	if got := a.Add(usage.Usage{Model: "b"}).Model; got != "b" {
		t.Errorf("Add named %q, want the last model given", got)
	}
	if got := want.Tokens(); got != 33 {
		t.Errorf("Tokens = %d, want input+output = 33 (cache and reasoning are subsets)", got)
	}
}

func TestLookupByExactNameOrLongestDashedPrefix(t *testing.T) {
	t.Parallel()
	p := usage.Prices{"gpt-4o": {Input: 1}, "gpt-4o-mini": {Input: 2}}
	for model, want := range map[string]float64{"gpt-4o": 1, "gpt-4o-2024-08-06": 1, "gpt-4o-mini": 2, "gpt-4o-mini-2024-07-18": 2} {
		pr, ok := p.Lookup(model)
		if !ok || pr.Input != want {
			t.Errorf("Lookup(%q) = %v, %v; want input %v", model, pr, ok, want)
		}
	}
	if _, ok := p.Lookup("gpt-4oo"); ok {
		t.Error("gpt-4oo priced as gpt-4o: a prefix must be followed by a dash")
	}
}

func TestCostPricesCacheReadsAndWritesAsSuch(t *testing.T) {
	t.Parallel()
	p := usage.Prices{
		"m":       {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
		"nocache": {Input: 3, Output: 15},
	}
	u := usage.Usage{InputTokens: 1_000_000, CacheReadTokens: 600_000, CacheWriteTokens: 100_000, OutputTokens: 200_000}
	// 300k uncached × 3 + 600k × 0.30 + 100k × 3.75 + 200k × 15, per million.
	want := 0.9 + 0.18 + 0.375 + 3
	if got := p.Cost("m", u); math.Abs(got-want) > 1e-12 {
		t.Errorf("Cost = %v, want %v", got, want)
	}
	if got, want := p.Cost("nocache", u), 3+3.0; math.Abs(got-want) > 1e-12 {
		t.Errorf("Cost with no cache prices = %v, want all input at the input price %v", got, want)
	}
	if got := p.Cost("unknown", u); got != 0 {
		t.Errorf("Cost of an unknown model = %v, want 0 (never guessed)", got)
	}
}

func TestDefaultPricesCoverBothProvidersWithCachePrices(t *testing.T) {
	t.Parallel()
	for _, m := range []string{"gpt-4o-2024-08-06", "gpt-5-mini", "claude-sonnet-4-5-20250929", "claude-3-5-haiku-20241022"} {
		pr, ok := usage.DefaultPrices.Lookup(m)
		if !ok || pr.CacheRead == 0 || pr.CacheRead >= pr.Input {
			t.Errorf("DefaultPrices.Lookup(%q) = %+v, %v: want a known model with a cache-read price below input", m, pr, ok)
		}
	}
}
