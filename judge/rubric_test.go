package judge_test

import (
	"context"
	"strings"
	"testing"
	"text/template"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
)

func TestParseGrade(t *testing.T) {
	t.Parallel()
	cpi := map[string]float64{"C": 1, "P": 0.5, "I": 0}
	tests := []struct {
		name   string
		text   string
		stop   string
		grades map[string]float64
		passAt float64
		want   outcome
		score  float64
	}{
		{"correct", "The answer matches.\nGRADE: C", judge.StopEnd, nil, 1, oPass, 1},
		{"incorrect", "Wrong city.\nGRADE: I\n", judge.StopEnd, nil, 1, oFail, 0},
		{"lower case", "fine\ngrade: c", judge.StopEnd, nil, 1, oPass, 1},
		{"surrounding space and CRLF", "ok\r\n  GRADE:  C  \r\n", judge.StopEnd, nil, 1, oPass, 1},
		{"grade line in the middle, note after", "GRADE: I\nNote: the reference is ambiguous.", judge.StopEnd, nil, 1, oFail, 0},
		{"last grade line wins", "First thought:\nGRADE: C\nOn reflection the year is wrong.\nGRADE: I", judge.StopEnd, nil, 1, oFail, 0},
		{"grade inside a sentence does not count", "I would give GRADE: C here.", judge.StopEnd, nil, 1, oUnscored, 0},
		{"no grade", "The answer looks right to me.", judge.StopEnd, nil, 1, oUnscored, 0},
		{"empty answer", "  \n", judge.StopEnd, nil, 1, oUnscored, 0},
		{"unknown letter", "GRADE: X", judge.StopEnd, nil, 1, oUnscored, 0},
		{"partial not allowed by default", "GRADE: P", judge.StopEnd, nil, 1, oUnscored, 0},
		{"partial configured, below passAt", "GRADE: P", judge.StopEnd, cpi, 1, oFail, 0.5},
		{"partial configured, passAt 0.5", "GRADE: P", judge.StopEnd, cpi, 0.5, oPass, 0.5},
		{"refusal", "I can't help with grading this.", judge.StopRefusal, nil, 1, oUnscored, 0},
		{"content filter", "", "content_filter", nil, 1, oUnscored, 0},
		{"truncated at max_tokens even with a grade", "Long reasoning…\nGRADE: C", judge.StopMaxTokens, nil, 1, oUnscored, 0},
		{"truncated at length (raw OpenAI reason)", "Long reasoning", "length", nil, 1, oUnscored, 0},
		{"grade with markdown bold is not a grade line", "**GRADE: C**", judge.StopEnd, nil, 1, oUnscored, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			grades := tt.grades
			if grades == nil {
				grades = map[string]float64{"C": 1, "I": 0}
			}
			v, err := judge.ParseGrade(judge.Response{Text: tt.text, StopReason: tt.stop}, grades, tt.passAt)
			require.Equal(t, tt.want, classify(t, v, err), "%+v %v", v, err)
			if err == nil {
				require.Equal(t, tt.score, v.Score)
				require.NotContains(t, v.Reason, "GRADE")
			}
		})
	}
}

type question struct {
	Q, Answer string
}

func TestRubricCallsTheModelAndRecords(t *testing.T) {
	t.Parallel()
	var got judge.Request
	m := judge.ModelFunc(func(_ context.Context, req judge.Request) (judge.Response, error) {
		got = req
		return judge.Response{Text: "Same city.\nGRADE: C", StopReason: judge.StopEnd, Model: "m-1",
			Usage: harness.Usage{InputTokens: 120, OutputTokens: 8, CostUSD: 0.001}}, nil
	})
	tmpl := template.Must(template.New("t").Parse("Q: {{.Input.Q}}\nRef: {{.Reference}}\nOut: {{.Output}}\nID: {{.SampleID}}"))
	r := judge.Rubric[question, string](m, tmpl, judge.WithReference(func(q question) any { return q.Answer }),
		judge.WithSystem("be strict"), judge.WithTemperature(0), judge.WithMaxTokens(300))
	e := &harness.Episode[question]{Sample: dataset.Sample[question]{ID: "q7", Input: question{"Capital of France?", "Paris"}}}
	v, err := r.Judge(context.Background(), e, "paris")
	require.NoError(t, err)
	require.True(t, v.Pass)
	require.Equal(t, "Same city.", v.Reason)
	require.Equal(t, "Q: Capital of France?\nRef: Paris\nOut: paris\nID: q7", got.Messages[0].Content)
	require.Equal(t, "be strict", got.System)
	require.Equal(t, 300, got.MaxTokens)
	require.NotNil(t, got.Temperature)
	require.Equal(t, 0.0, *got.Temperature)

	evs := e.Events()
	require.Len(t, evs, 1)
	require.Equal(t, "judge", evs[0].Kind)
	require.Equal(t, "rubric", evs[0].Name)
	require.Contains(t, string(evs[0].Input), "Capital of France?")
	require.Contains(t, string(evs[0].Output), "GRADE: C")
	require.Equal(t, harness.Usage{InputTokens: 120, OutputTokens: 8, CostUSD: 0.001}, e.Usage(), "usage reaches the episode")
}

func TestRubricDefaultTemplateAndErrors(t *testing.T) {
	t.Parallel()
	var prompt string
	m := judge.ModelFunc(func(_ context.Context, req judge.Request) (judge.Response, error) {
		prompt = req.Messages[0].Content
		return judge.Response{Text: "no verdict", StopReason: judge.StopEnd}, nil
	})
	r := judge.Rubric[string, string](m, nil, judge.WithReference(func(s string) any { return "REF" }))
	e := &harness.Episode[string]{Sample: dataset.Sample[string]{ID: "x", Input: "QUESTION"}}
	_, err := r.Judge(context.Background(), e, "OUTPUT")
	require.ErrorIs(t, err, judge.ErrUnscored, "an unreadable grade is unscored, not a failure")
	for _, s := range []string{"QUESTION", "REF", "OUTPUT", "GRADE: C"} {
		require.True(t, strings.Contains(prompt, s), "prompt lacks %q", s)
	}

	down := judge.ModelFunc(func(context.Context, judge.Request) (judge.Response, error) {
		return judge.Response{}, &judge.APIError{Provider: "openai", StatusCode: 503, Retryable: true}
	})
	e = &harness.Episode[string]{Sample: dataset.Sample[string]{ID: "x", Input: "q"}}
	_, err = judge.Rubric[string, string](down, nil).Judge(context.Background(), e, "o")
	require.Error(t, err)
	require.NotErrorIs(t, err, judge.ErrUnscored, "a grader outage is an error")
	require.ErrorContains(t, err, "judge: rubric: openai: HTTP 503")
	require.Len(t, e.Events(), 1)
	require.NotEmpty(t, e.Events()[0].Error)

	require.Panics(t, func() {
		judge.Rubric[string, string](m, nil, judge.WithReference(func(q question) any { return q.Answer }))
	}, "a reference function of the wrong input type")
}
