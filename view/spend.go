package view

// What a run spends, on its page: its budget, when its manifest records
// one, and its total cost projected from the episodes finished so far.

import (
	"fmt"

	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/internal/costproj"
)

// spend sums the costs of the records folded in, for the projection.
type spend struct {
	n          int64
	sum, sumSq float64
}

func (s *spend) add(cost float64) {
	s.n++
	s.sum += cost
	s.sumSq += cost * cost
}

func (s *spend) merge(o *spend) {
	s.n += o.n
	s.sum += o.sum
	s.sumSq += o.sumSq
}

// spendRows are the summary rows of a run's budget and projected cost.
// The run's size and budget come from its manifest; a shard's log, or a
// log without a manifest, has no projection.
func spendRows(snap *snapshot) []row {
	m, err := manifest.Read(snap.Path)
	if err != nil || m == nil {
		return nil
	}
	var rows []row
	spent := snap.Report.Usage
	if b := m.Budget; b != nil && (b.CostUSD > 0 || b.Tokens > 0) {
		var parts []string
		if b.CostUSD > 0 {
			parts = append(parts, fmt.Sprintf("$%.2f", b.CostUSD))
		}
		if b.Tokens > 0 {
			parts = append(parts, fmt.Sprintf("%d tokens", b.Tokens))
		}
		rows = append(rows, row{"budget", fmt.Sprintf("%s a run (as its latest start set it); the log holds $%.4f and %d tokens spent",
			joinOr(parts), spent.CostUSD, spent.Tokens()), "budget-left"})
	}
	if m.Shard == "" && snap.Report.Episodes > 0 {
		total := int64(m.Dataset.Samples) * int64(m.Epochs)
		left := total - int64(snap.Report.Episodes)
		if lo, hi, ok := costproj.Total(snap.Ext.spend.sum, snap.Ext.spend.sumSq, snap.Ext.spend.n, left); ok && left > 0 {
			rows = append(rows, row{"projected cost", fmt.Sprintf("$%.4f–$%.4f for the run's %d episodes, %d left (95%%, from the cost per finished episode)",
				lo, hi, total, left), "projected-cost"})
		}
	}
	return rows
}

func joinOr(parts []string) string {
	if len(parts) == 2 {
		return parts[0] + " or " + parts[1]
	}
	return parts[0]
}
