package report

// A judge's stages: how often each was called and gave a verdict, from
// the records' judge_stages, so that a stage that never gave one fails a
// gate however few episodes reached it.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/proctor-evals/proctor/internal/judgestages"
	"github.com/proctor-evals/proctor/sink"
)

// JudgeStage is one stage of the judge (its path through the combinators,
// as an ErrorSource names it: "judge/cascade.expensive/rubric"): the calls
// it got over the run's records and how many gave a verdict.
type JudgeStage struct {
	Stage    string `json:"stage"`
	Calls    int    `json:"calls"`
	Verdicts int    `json:"verdicts"`
}

// judgeStages adds up the records' judge_stages.
type judgeStages struct {
	list      []JudgeStage
	index     map[string]int
	malformed bool // a record's field did not parse (warned once)
}

func (s *judgeStages) add(r *sink.Record) string {
	if r.JudgeStages == "" {
		return ""
	}
	err := judgestages.Parse(r.JudgeStages, func(c judgestages.Count) {
		i, ok := s.index[c.Path]
		if !ok {
			if s.index == nil {
				s.index = map[string]int{}
			}
			i = len(s.list)
			path := strings.Clone(c.Path) // r's strings may share a reader's buffer
			s.index[path] = i
			s.list = append(s.list, JudgeStage{Stage: path})
		}
		s.list[i].Calls += c.Calls
		s.list[i].Verdicts += c.Verdicts
	})
	if err != nil && !s.malformed {
		s.malformed = true
		return fmt.Sprintf("sample %q epoch %d: %v: its stages are left out", r.SampleID, r.Epoch, err)
	}
	return ""
}

// report lists the stages by path.
func (s *judgeStages) report() []JudgeStage {
	out := slices.Clone(s.list)
	slices.SortFunc(out, func(x, y JudgeStage) int { return strings.Compare(x.Stage, y.Stage) })
	return out
}

// silentStage returns the stage that was called and never gave a verdict,
// the deepest (the one nearest the failure: a cascade's expensive stage
// fails with the rubric it holds) first, "" when every stage gave one.
func silentStage(stages []JudgeStage) string {
	var silent []string
	for _, s := range stages {
		if s.Calls > 0 && s.Verdicts == 0 {
			silent = append(silent, s.Stage)
		}
	}
	if len(silent) == 0 {
		return ""
	}
	return slices.MinFunc(silent, func(a, b string) int {
		return cmp.Or(cmp.Compare(strings.Count(b, "/"), strings.Count(a, "/")), strings.Compare(a, b))
	})
}
