package eval

// Variants: one eval runs several harnesses (a model, a prompt, a
// scaffold) over the same samples. Internally a sample has slots, one per
// (variant, epoch): slot = variant × epochs + epoch, the variant's index
// being its place in Eval.Variants (not in a selection), so that every
// process of a distributed run numbers them alike. The engine's index of
// an episode is sample × slots + slot, so a sample's variants are claimed
// together (pairs for elimination) and its environment is provisioned
// once for all of them.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/sink"
)

// Variant is one of an eval's harnesses: a model, a prompt or a scaffold
// compared with the others on the same samples (docs/comparing-agents.md).
// Its episodes are keyed (variant, sample, epoch) and share the sample's
// environment and episode seeds with the other variants'.
type Variant[T, O any] struct {
	// Name keys the variant's records: non-empty, unique in the eval, of
	// letters, digits and . _ - / +.
	Name    string
	Harness harness.Harness[T, O]
	// Version is the variant's harness version: it replaces
	// Versions.Harness for its episodes (resume and reuse compare it per
	// variant).
	Version string
}

// variantPlan is how a run numbers its episodes' slots. Without variants
// it has one unnamed variant, and a slot is an epoch.
type variantPlan struct {
	names    []string // Eval.Variants' names, in order; [""] without variants
	versions []string // their harness versions
	epochs   int      // per variant
	index    map[string]int
	// selected[v] is whether this run runs variant v (Config.Variants).
	selected []bool
}

func (p *variantPlan) slots() int { return len(p.names) * p.epochs }

// named reports whether the eval has variants (records name theirs).
func (p *variantPlan) named() bool { return p.names[0] != "" }

// slot is the slot of variant v's epoch ep.
func (p *variantPlan) slot(v, ep int) int { return v*p.epochs + ep }

// name is the variant name of a slot, "" without variants.
func (p *variantPlan) name(slot int) string { return p.names[slot/p.epochs] }

// epoch is the epoch of a slot.
func (p *variantPlan) epoch(slot int) int { return slot % p.epochs }

// slotOf returns the slot of a record's (variant, epoch), and false when
// this run has no such episode (a variant it does not know, an epoch out
// of range).
func (p *variantPlan) slotOf(variant string, epoch int) (int, bool) {
	v, ok := p.index[variant]
	if !ok || epoch < 0 || epoch >= p.epochs {
		return 0, false
	}
	return p.slot(v, epoch), true
}

// slotOfBytes is slotOf for a variant name read from a log's line.
func (p *variantPlan) slotOfBytes(variant []byte, epoch int) (int, bool) {
	v, ok := p.index[string(variant)] // no allocation: a map lookup by string(bytes)
	if !ok || epoch < 0 || epoch >= p.epochs {
		return 0, false
	}
	return p.slot(v, epoch), true
}

// recordSlot is slotOf of a record.
func (p *variantPlan) recordSlot(r *sink.Record) (int, bool) {
	if len(p.names) == 1 && r.Variant == p.names[0] { // the common case: no map lookup
		return r.Epoch, r.Epoch >= 0 && r.Epoch < p.epochs
	}
	return p.slotOf(r.Variant, r.Epoch)
}

// newVariantPlan checks e's variants and cfg.Variants and numbers the
// slots; epochs is the run's (defaults applied).
func newVariantPlan[T, O any](e *Eval[T, O], cfg *Config, epochs int) (*variantPlan, error) {
	p := &variantPlan{epochs: epochs, index: map[string]int{}}
	if len(e.Variants) == 0 {
		if len(cfg.Variants) > 0 {
			return nil, &ConfigError{fmt.Sprintf("Config.Variants names %s, but the eval has no variants (Eval.Variants)", strings.Join(cfg.Variants, ", "))}
		}
		p.names, p.versions, p.selected = []string{""}, []string{e.Versions.Harness}, []bool{true}
		p.index[""] = 0
		return p, nil
	}
	for i, v := range e.Variants {
		if err := CheckVariantName(v.Name); err != nil {
			return nil, &ConfigError{fmt.Sprintf("Eval.Variants[%d]: %v", i, err)}
		}
		if j, dup := p.index[v.Name]; dup {
			return nil, &ConfigError{fmt.Sprintf("Eval.Variants[%d] and [%d] are both named %q: names key the records", j, i, v.Name)}
		}
		if v.Harness == nil {
			return nil, &ConfigError{fmt.Sprintf("Eval.Variants[%d] (%q) has no Harness", i, v.Name)}
		}
		p.index[v.Name] = i
		p.names = append(p.names, v.Name)
		p.versions = append(p.versions, v.Version)
	}
	p.selected = make([]bool, len(p.names))
	if len(cfg.Variants) == 0 {
		for i := range p.selected {
			p.selected[i] = true
		}
		return p, nil
	}
	for _, name := range cfg.Variants {
		i, ok := p.index[name]
		if !ok {
			return nil, &ConfigError{fmt.Sprintf("Config.Variants names %q, which is not one of the eval's variants (%s)", name, strings.Join(p.names, ", "))}
		}
		p.selected[i] = true
	}
	return p, nil
}

// CheckVariantName reports why name cannot name a variant: it keys the
// records, file names and command lines (-variants a,b), so it is
// non-empty, at most 128 bytes, of letters, digits and . _ - / +.
func CheckVariantName(name string) error {
	if name == "" {
		return fmt.Errorf("a variant needs a name")
	}
	if len(name) > 128 {
		return fmt.Errorf("variant name %.20q… is %d bytes long: at most 128", name, len(name))
	}
	for _, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.ContainsRune("._-/+", c):
		default:
			return fmt.Errorf("variant name %q has %q: use letters, digits and . _ - / +", name, c)
		}
	}
	return nil
}

// harnesses returns the harness of each variant of p, in its order.
func (e *Eval[T, O]) harnesses() []harness.Harness[T, O] {
	if len(e.Variants) == 0 {
		return []harness.Harness[T, O]{e.Harness}
	}
	hs := make([]harness.Harness[T, O], len(e.Variants))
	for i, v := range e.Variants {
		hs[i] = v.Harness
	}
	return hs
}

// manifestVariants are the variants a manifest names; nil without.
func (p *variantPlan) manifestVariants() []manifest.Variant {
	if len(p.names) == 1 && p.names[0] == "" {
		return nil
	}
	vs := make([]manifest.Variant, len(p.names))
	for i := range p.names {
		vs[i] = manifest.Variant{Name: p.names[i], Harness: p.versions[i]}
	}
	return vs
}

// variantsDiff lists the variants whose harness version changed since the
// log's manifest (old) was written: their records are stale, as all of a
// log's are when Versions.Harness changes. A variant added runs its
// episodes; one removed is excluded from the report.
func variantsDiff(old, now []manifest.Variant) []string {
	was := map[string]string{}
	for _, v := range old {
		was[v.Name] = v.Harness
	}
	var d []string
	for _, v := range now {
		if h, ok := was[v.Name]; ok && h != v.Harness {
			d = append(d, fmt.Sprintf("variant %s's harness version: %q in the log, %q now", v.Name, h, v.Harness))
		}
	}
	return d
}

// mergeVariants is the manifest's variants on resume: this run's, then
// those the log's manifest named that the eval no longer has (their
// records stay in the log).
func mergeVariants(now, old []manifest.Variant) []manifest.Variant {
	for _, v := range old {
		if !slices.ContainsFunc(now, func(n manifest.Variant) bool { return n.Name == v.Name }) {
			now = append(now, v)
		}
	}
	return now
}

// variantOf names a variant in a message: " variant NAME", or nothing
// without variants.
func variantOf(name string) string {
	if name == "" {
		return ""
	}
	return " variant " + name
}

// epochsOnly is the plan of an eval without variants.
func epochsOnly(epochs int) *variantPlan {
	return &variantPlan{names: []string{""}, versions: []string{""}, epochs: epochs, index: map[string]int{"": 0}, selected: []bool{true}}
}
