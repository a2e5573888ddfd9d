package eval

// Resources on record: the sandbox limits and images a run's samples ask
// for go into its manifest when it starts (loadSamples finds them), the
// digests their images resolved to as the run provisions them.

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/sandbox"
)

// imageDigests are the "image=digest" pairs a run's environments had.
type imageDigests struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (d *imageDigests) add(r sandbox.Resources) {
	if r.ImageDigest == "" {
		return
	}
	d.mu.Lock()
	if d.seen == nil {
		d.seen = map[string]bool{}
	}
	d.seen[r.Image+"="+r.ImageDigest] = true
	d.mu.Unlock()
}

// merge adds the digests seen to m's, reporting whether m changed and a
// warning when an image resolved to a digest m did not hold for it.
func (d *imageDigests) merge(m *manifest.Manifest) (changed bool, warning string) {
	d.mu.Lock()
	seen := slices.Sorted(maps.Keys(d.seen))
	d.mu.Unlock()
	had := map[string]bool{}
	for _, p := range m.ImageDigests {
		had[p] = true
	}
	var moved []string
	for _, p := range seen {
		if !had[p] {
			if len(m.ImageDigests) > 0 {
				moved = append(moved, p)
			}
			m.ImageDigests = append(m.ImageDigests, p)
			changed = true
		}
	}
	slices.Sort(m.ImageDigests)
	if len(moved) > 0 {
		warning = fmt.Sprintf("the sandbox image resolved to digests the log's earlier episodes did not run on (%v): its records mix environments", moved)
	}
	return changed, warning
}
