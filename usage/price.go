package usage

import "strings"

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	Input  float64 // per million uncached input (prompt) tokens
	Output float64 // per million output (completion) tokens, reasoning included
	// CacheRead is per million input tokens read from the prompt cache;
	// CacheWrite per million written to it. Zero means the table gives no
	// such price: those tokens are priced as Input (never below it by
	// guess).
	CacheRead  float64
	CacheWrite float64
}

// Prices maps model names to prices. A model is looked up by its exact name,
// else by the longest key that is a prefix of it followed by "-" (so
// "gpt-4o" prices "gpt-4o-2024-08-06" but not "gpt-4o-mini", which needs its
// own entry and has one).
type Prices map[string]Price

// Lookup returns the price of model and whether it is known.
func (p Prices) Lookup(model string) (Price, bool) {
	if pr, ok := p[model]; ok {
		return pr, true
	}
	best, found := "", false
	for k := range p {
		if len(k) > len(best) && strings.HasPrefix(model, k+"-") {
			best, found = k, true
		}
	}
	return p[best], found
}

// Cost returns the cost of u's tokens on model; 0 for an unknown model:
// a price is never guessed. Cache reads and writes are priced as such and
// the rest of the input (InputTokens − CacheReadTokens − CacheWriteTokens)
// at the input price; u.CostUSD and u.Model are ignored.
func (p Prices) Cost(model string, u Usage) float64 {
	pr, ok := p.Lookup(model)
	if !ok {
		return 0
	}
	read, write := pr.CacheRead, pr.CacheWrite
	if read == 0 {
		read = pr.Input
	}
	if write == 0 {
		write = pr.Input
	}
	uncached := max(u.InputTokens-u.CacheReadTokens-u.CacheWriteTokens, 0)
	return (float64(uncached)*pr.Input + float64(u.CacheReadTokens)*read +
		float64(u.CacheWriteTokens)*write + float64(u.OutputTokens)*pr.Output) / 1e6
}

// DefaultPrices are list prices in USD per million tokens (standard tier,
// no batch discount) as the providers published them in November 2025:
// https://openai.com/api/pricing and
// https://docs.anthropic.com/en/docs/about-claude/pricing. Anthropic's
// cache writes are its 5-minute writes (1.25× input), its cache reads 0.1×
// input; OpenAI charges nothing extra for writing its cache and reports no
// cache writes. Prices change: the judges' clients and the gateway take a
// table of the user's in their options. Models missing here cost 0, they
// are never guessed; dated model IDs ("claude-sonnet-4-20250514") match by
// prefix. Do not modify the map: copy it (maps.Clone) and change the copy.
var DefaultPrices = Prices{
	// OpenAI
	"gpt-4o":       {Input: 2.50, Output: 10, CacheRead: 1.25},
	"gpt-4o-mini":  {Input: 0.15, Output: 0.60, CacheRead: 0.075},
	"gpt-4.1":      {Input: 2, Output: 8, CacheRead: 0.50},
	"gpt-4.1-mini": {Input: 0.40, Output: 1.60, CacheRead: 0.10},
	"gpt-4.1-nano": {Input: 0.10, Output: 0.40, CacheRead: 0.025},
	"gpt-5":        {Input: 1.25, Output: 10, CacheRead: 0.125},
	"gpt-5-mini":   {Input: 0.25, Output: 2, CacheRead: 0.025},
	"gpt-5-nano":   {Input: 0.05, Output: 0.40, CacheRead: 0.005},
	"o3":           {Input: 2, Output: 8, CacheRead: 0.50},
	"o4-mini":      {Input: 1.10, Output: 4.40, CacheRead: 0.275},
	// Anthropic
	"claude-opus-4-5":   {Input: 5, Output: 25, CacheRead: 0.50, CacheWrite: 6.25},
	"claude-opus-4-1":   {Input: 15, Output: 75, CacheRead: 1.50, CacheWrite: 18.75},
	"claude-opus-4":     {Input: 15, Output: 75, CacheRead: 1.50, CacheWrite: 18.75},
	"claude-sonnet-4-5": {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
	"claude-sonnet-4":   {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
	"claude-3-7-sonnet": {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
	"claude-haiku-4-5":  {Input: 1, Output: 5, CacheRead: 0.10, CacheWrite: 1.25},
	"claude-3-5-haiku":  {Input: 0.80, Output: 4, CacheRead: 0.08, CacheWrite: 1},
}
