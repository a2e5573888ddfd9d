package judge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"text/template"
	"time"

	"github.com/proctor-evals/proctor/harness"
)

// DefaultRubric is the template [Rubric] uses when given none: a QA grader
// comparing the output with the reference, in the style of the classic
// model-graded QA prompt.
const DefaultRubric = `You are grading an answer to a question against a reference answer.

[Question]
{{.Input}}

[Reference answer]
{{.Reference}}

[Submitted answer]
{{.Output}}

Does the submitted answer agree with the reference answer on the facts
that matter? Ignore differences of style, wording and formatting. Explain
your reasoning in a few sentences, then end your reply with a final line
that is exactly "GRADE: C" if the answer is correct or "GRADE: I" if it is
incorrect.`

// RubricData is what a rubric template sees.
type RubricData struct {
	Input     any               // the sample's input (T)
	Output    any               // the harness's output (O)
	Reference any               // from the Reference option; nil without it
	SampleID  string            // the sample's ID
	Tags      map[string]string // the sample's tags
}

// RubricOption configures a [Rubric].
type RubricOption func(*rubricConfig)

type rubricConfig struct {
	name        string
	system      string
	maxTokens   int
	temperature *float64
	grades      map[string]float64
	passAt      float64
	reference   any // func(T) any
}

// WithReference gives the template its .Reference: ref applied to the
// sample's input. Its T must be the Rubric's T; Rubric panics otherwise.
func WithReference[T any](ref func(T) any) RubricOption {
	return func(c *rubricConfig) { c.reference = ref }
}

// WithGrades sets the grade letters the model may give and their scores, and
// the score at and above which a grade passes. The default is
// {"C": 1, "I": 0} passing at 1. For partial credit:
//
//	judge.WithGrades(map[string]float64{"C": 1, "P": 0.5, "I": 0}, 1)
//
// Letters are matched case-insensitively.
func WithGrades(grades map[string]float64, passAt float64) RubricOption {
	return func(c *rubricConfig) {
		c.grades = make(map[string]float64, len(grades))
		for k, v := range grades {
			c.grades[strings.ToUpper(k)] = v
		}
		c.passAt = passAt
	}
}

// WithSystem sets the system prompt.
func WithSystem(s string) RubricOption { return func(c *rubricConfig) { c.system = s } }

// WithMaxTokens bounds the grader's answer; default 1024. A truncated answer
// is unscored, so leave room for the reasoning.
func WithMaxTokens(n int) RubricOption { return func(c *rubricConfig) { c.maxTokens = n } }

// WithTemperature sets the sampling temperature; default: not sent (the
// provider's default). Use 0 for the most repeatable grades and above 0
// with [Vote].
func WithTemperature(t float64) RubricOption { return func(c *rubricConfig) { c.temperature = &t } }

// WithName names the judge in trace events; default "rubric".
func WithName(name string) RubricOption { return func(c *rubricConfig) { c.name = name } }

// Rubric is a model-graded judge: it renders tmpl (nil means
// [DefaultRubric]) over a [RubricData], asks m, and reads the grade from the
// answer.
//
// The answer must contain a line "GRADE: X" (the whole line, surrounding
// space and case aside), X a letter of the configured grades; the last such
// line counts, so a grader that changes its mind decides with its final
// word, and a grade mentioned inside a sentence does not count. The verdict's
// Score is the grade's score and its Reason the grader's reasoning (the
// answer without its grade lines, shortened). Scores["grade"] holds it too.
//
// The model's answer is unscored ([Unscored]), never a failure, when it
// cannot be read: no grade line, an unknown letter, a refusal (stop reason
// refusal or content filter), a truncated answer (stop reason max_tokens or
// length, even if a grade line made it in: it may not be the last word), or
// an empty answer. An error of m (after its own retries) is returned as an
// error: the grader was unavailable, which is infrastructure.
//
// Each call records a trace event of Kind "judge" with the prompt as Input,
// the answer as Output, and the call's usage, which ep.Record adds to the
// episode's tokens and cost.
func Rubric[T, O any](m Model, tmpl *template.Template, opts ...RubricOption) Judge[T, O] {
	if tmpl == nil {
		tmpl = template.Must(template.New("rubric").Parse(DefaultRubric))
	}
	cfg := rubricConfig{name: "rubric", maxTokens: 1024, grades: map[string]float64{"C": 1, "I": 0}, passAt: 1}
	for _, o := range opts {
		o(&cfg)
	}
	var ref func(T) any
	if cfg.reference != nil {
		var ok bool
		if ref, ok = cfg.reference.(func(T) any); !ok {
			var zero T
			panic(fmt.Sprintf("judge: Rubric: WithReference takes %T, want func(%T) any", cfg.reference, zero))
		}
	}
	return Func[T, O](func(ctx context.Context, ep *harness.Episode[T], out O) (Verdict, error) {
		data := RubricData{Input: ep.Sample.Input, Output: out, SampleID: ep.Sample.ID, Tags: ep.Sample.Tags}
		if ref != nil {
			data.Reference = ref(ep.Sample.Input)
		}
		var prompt bytes.Buffer
		if err := tmpl.Execute(&prompt, data); err != nil {
			return Verdict{}, fmt.Errorf("judge: rubric template: %w", err)
		}
		req := Request{System: cfg.system, Messages: []Message{{Role: "user", Content: prompt.String()}},
			MaxTokens: cfg.maxTokens, Temperature: cfg.temperature}
		start := time.Now()
		resp, err := m.Complete(ctx, req)
		ev := harness.Event{Time: start, Kind: "judge", Name: cfg.name, Input: mustJSON(req),
			Duration: time.Since(start), Usage: resp.Usage}
		if err != nil {
			ev.Error = err.Error()
			ep.Record(ev)
			return Verdict{}, fmt.Errorf("judge: rubric: %w", err)
		}
		ev.Output = mustJSON(resp)
		ep.Record(ev)
		return ParseGrade(resp, cfg.grades, cfg.passAt)
	})
}

var gradeLine = regexp.MustCompile(`(?im)^[ \t]*GRADE:[ \t]*([A-Z]+)[ \t]*\r?$`)

// ParseGrade reads a grader's answer as [Rubric] does: the last line
// "GRADE: X", X a key of grades (upper case), passing when its score is at
// least passAt. An answer that cannot be read, a refusal or a truncated
// answer is an unscored error.
func ParseGrade(resp Response, grades map[string]float64, passAt float64) (Verdict, error) {
	switch resp.StopReason {
	case StopMaxTokens, "length":
		return Verdict{}, Unscored("rubric: the grader's answer was truncated at its token limit")
	case StopRefusal, "content_filter":
		return Verdict{}, Unscored("rubric: the grader refused: " + clip(resp.Text, 200))
	}
	if strings.TrimSpace(resp.Text) == "" {
		return Verdict{}, Unscored("rubric: the grader's answer is empty")
	}
	ms := gradeLine.FindAllStringSubmatchIndex(resp.Text, -1)
	if len(ms) == 0 {
		return Verdict{}, Unscored("rubric: no GRADE line in the grader's answer: " + clip(lastLine(resp.Text), 200))
	}
	m := ms[len(ms)-1]
	letter := strings.ToUpper(resp.Text[m[2]:m[3]])
	score, ok := grades[letter]
	if !ok {
		return Verdict{}, Unscored(fmt.Sprintf("rubric: unknown grade %q (want one of %s)", letter, strings.Join(sortedKeys(grades), ", ")))
	}
	var lines []string
	for _, l := range strings.Split(gradeLine.ReplaceAllString(resp.Text, ""), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	reasoning := strings.Join(lines, "\n")
	return Verdict{Pass: score >= passAt, Score: score, Reason: clip(reasoning, 500),
		Scores: map[string]float64{"grade": score}}, nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// clip shortens s to about n bytes, on a rune boundary, keeping the end,
// where a grader's conclusion is.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && s[i]&0xC0 == 0x80 {
		i++
	}
	return "…" + s[i:]
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(err.Error())
	}
	return b
}
