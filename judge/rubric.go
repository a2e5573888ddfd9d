package judge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/proctor-evals/proctor/harness"
)

// DefaultRubric is the template [Rubric] uses when given none: a grader of
// the task's answer, against the reference answer when there is one, in
// the style of the classic model-graded QA prompt.
const DefaultRubric = `You are grading a submitted answer to a task{{if .Reference}} against a reference answer{{end}}.

[Task]
{{.Task}}
{{if .Reference}}
[Reference answer]
{{.Reference}}
{{end}}
[Submitted answer]
{{.Output}}
{{if .Transcript}}
[Transcript of how the agent reached it]
{{.Transcript}}
{{end}}
{{if .Reference}}Does the submitted answer agree with the reference answer on the facts
that matter?{{else}}Does the submitted answer accomplish the task correctly?{{end}}{{if .Transcript}}
An answer reached by steps the task forbids, or by undoing its checks, is
incorrect.{{end}} Ignore differences of style, wording and formatting. Explain
your reasoning in a few sentences, then end your reply with a final line
that is exactly "GRADE: C" if the answer is correct or "GRADE: I" if it is
incorrect.`

var defaultRubric = template.Must(template.New("rubric").Parse(DefaultRubric))

// RubricData is what a rubric template sees.
type RubricData struct {
	Input     any               // the sample's input (T), for templates that pick fields
	Task      string            // what the grader sees of the input: see [RubricOptions].Task
	Output    any               // the harness's output (O)
	Reference string            // from [RubricOptions].Reference; "" without it
	SampleID  string            // the sample's ID
	Tags      map[string]string // the sample's tags
	// Transcript is the episode's transcript as [RenderTranscript]
	// shows it, when [RubricOptions].Transcript asks for it; "" without.
	Transcript string
}

// RubricOptions configures a [Rubric]. The zero value (and nil) is valid.
type RubricOptions[T any] struct {
	// Template is rendered over a [RubricData] into the prompt; nil:
	// [DefaultRubric].
	Template *template.Template
	// Task is what the grader sees of the sample's input, rendered as
	// indented JSON (a string as itself). nil: the input itself, which
	// the default template accepts only for an input of a string,
	// number or bool type: of a struct or a map the grader would see
	// every field, an answer key included, so Rubric panics and asks for
	// Task. Return the whole input to show it all on purpose.
	Task func(T) any
	// Reference is the reference answer the grader compares with; nil:
	// none, and the default template grades without one. It is the only
	// way the answer key reaches the default prompt.
	Reference func(T) string
	// System is the system prompt; "": none.
	System string
	// MaxTokens bounds the grader's answer; 0: 1024. A truncated answer
	// is unscored, so leave room for the reasoning.
	MaxTokens int
	// Temperature is the sampling temperature; nil: not sent (the
	// provider's default). Use 0 for the most repeatable grades and
	// above 0 with [Vote].
	Temperature *float64
	// Grades are the letters the model may give and their scores,
	// matched case-insensitively; nil: {"C": 1, "I": 0}. For partial
	// credit: {"C": 1, "P": 0.5, "I": 0}.
	Grades map[string]float64
	// PassAt is the score at and above which a grade passes; 0: the
	// highest score of Grades (only the best grade passes).
	PassAt float64
	// Name names the judge in transcript events; "": "rubric".
	Name string
	// Transcript shows the grader the episode's transcript, within a
	// token budget (see [RenderTranscript]); nil: the grader sees the
	// answer alone.
	Transcript *TranscriptOptions
}

// Rubric is a model-graded judge: it renders the template over a
// [RubricData], asks m, and reads the grade from the answer.
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
// an empty answer; an unscored error of m (a response too large) stays
// unscored. Any other error of m is returned as an error: the grader was
// unavailable, which is infrastructure. Wrap m with [Retry] for transient
// faults.
//
// Each call records a transcript event of Kind "judge" with the prompt as Input,
// the answer as Output, and the call's usage, which ep.Record adds to the
// episode's tokens and cost.
//
// Rubric panics on options the default template cannot honour safely (see
// [RubricOptions].Task): a mistake found when the eval is built, before
// any episode runs.
func Rubric[T, O any](m Model, opts *RubricOptions[T]) Judge[T, O] {
	var o RubricOptions[T]
	if opts != nil {
		o = *opts
	}
	if o.Template == nil {
		o.Template = defaultRubric
		if o.Task == nil && !scalar(reflect.TypeFor[T]()) {
			panic(fmt.Sprintf("judge: Rubric: set RubricOptions.Task to say what of a %v input the grader sees "+
				"(the default template shows only string, number or bool inputs whole, lest an answer key reach the grader)",
				reflect.TypeFor[T]()))
		}
	}
	if o.Name == "" {
		o.Name = "rubric"
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = 1024
	}
	grades := map[string]float64{"C": 1, "I": 0}
	if o.Grades != nil {
		grades = make(map[string]float64, len(o.Grades))
		for k, v := range o.Grades {
			grades[strings.ToUpper(k)] = v
		}
	}
	passAt := o.PassAt
	if passAt == 0 {
		passAt = math.Inf(-1)
		for _, v := range grades {
			passAt = max(passAt, v)
		}
	}
	// Named counts its calls as a stage and marks its errors with its name.
	return Named(o.Name, Func[T, O](func(ctx context.Context, ep *harness.Episode[T], out O) (Verdict, error) {
		data := RubricData{Input: ep.Sample.Input, Output: out, SampleID: ep.Sample.ID, Tags: ep.Sample.Tags}
		var task any = ep.Sample.Input
		if o.Task != nil {
			task = o.Task(ep.Sample.Input)
		}
		var err error
		if data.Task, err = render(task); err != nil {
			return Verdict{}, Permanent(fmt.Errorf("judge: rubric: rendering the task of sample %q: %w", ep.Sample.ID, err))
		}
		if o.Reference != nil {
			data.Reference = o.Reference(ep.Sample.Input)
		}
		if o.Transcript != nil {
			data.Transcript = RenderTranscript(ep.Events(), o.Transcript)
		}
		var prompt bytes.Buffer
		if err := o.Template.Execute(&prompt, data); err != nil {
			// A template that fails fails alike on every try.
			return Verdict{}, Permanent(fmt.Errorf("judge: rubric template: %w", err))
		}
		req := Request{System: o.System, Messages: []Message{{Role: "user", Content: prompt.String()}},
			MaxTokens: o.MaxTokens, Temperature: o.Temperature}
		start := time.Now()
		resp, err := m.Complete(ctx, req)
		ev := harness.Event{Time: start, Kind: "judge", Name: o.Name, Input: mustJSON(req),
			Duration: time.Since(start), Usage: resp.Usage}
		if ev.Usage.Model == "" {
			ev.Usage.Model = resp.Model
		}
		if err != nil {
			ev.Error = err.Error()
			ep.AddEvent(ev)
			return Verdict{}, fmt.Errorf("judge: rubric: %w", err)
		}
		ev.Output = mustJSON(resp)
		ep.AddEvent(ev)
		return ParseGrade(resp, grades, passAt)
	}))
}

// scalar reports whether a value of type t shows nothing but itself.
func scalar(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// render shows v to the grader: a string (of any string type) as itself, anything else as
// indented JSON (never Go syntax, which shows unexported fields and no
// names a reader knows).
func render(v any) (string, error) {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.String {
		return rv.String(), nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	return string(b), err
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
		return Verdict{}, Unscored(fmt.Sprintf("rubric: unknown grade %q (want one of %s)", letter, strings.Join(slices.Sorted(maps.Keys(grades)), ", ")))
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
