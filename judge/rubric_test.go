package judge_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"text/template"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/judge/openai"
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

// The grader sees the answer key only when told which it is. The prompt is
// checked where it lands: in the body an OpenAI-compatible server receives.
func TestRubricShowsTheAnswerKeyOnlyWhenTold(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var prompt string
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct{ Role, Content string }
		}
		require.NoError(t, json.NewDecoder(r.Body).Decode(&body))
		mu.Lock()
		prompt = body.Messages[len(body.Messages)-1].Content
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Wrong city.\nGRADE: I"},"finish_reason":"stop"}]}`)
	}))
	t.Cleanup(s.Close)
	grader := openai.New(&openai.Options{BaseURL: s.URL, Model: "m"})
	e := &harness.Episode[question]{Sample: dataset.Sample[question]{ID: "q1", Input: question{"Capital of France?", "Paris"}}}
	ask := func(o *judge.RubricOptions[question]) string {
		t.Helper()
		v, err := judge.Rubric[question, string](grader, o).Judge(context.Background(), e, "Lyon")
		require.NoError(t, err)
		require.False(t, v.Pass)
		mu.Lock()
		defer mu.Unlock()
		return prompt
	}

	p := ask(&judge.RubricOptions[question]{Task: func(q question) any { return q.Q }})
	require.Contains(t, p, "Capital of France?")
	require.Contains(t, p, "Lyon")
	require.NotContains(t, p, "Paris", "no reference configured: the answer key stays out")
	require.NotContains(t, p, "[Reference answer]")

	p = ask(&judge.RubricOptions[question]{Task: func(q question) any { return q.Q },
		Reference: func(q question) string { return q.Answer }})
	require.Equal(t, 1, strings.Count(p, "Paris"), p)
	require.Contains(t, p, "[Reference answer]\nParis\n")

	// Shown whole on purpose, the input is JSON, not Go syntax.
	p = ask(&judge.RubricOptions[question]{Task: func(q question) any { return q }})
	require.Contains(t, p, "{\n  \"Q\": \"Capital of France?\",\n  \"Answer\": \"Paris\"\n}")
	require.NotContains(t, p, "{Capital of France? Paris}")

	require.Panics(t, func() { judge.Rubric[question, string](grader, nil) }, "the whole struct is not shown by accident")
	require.Panics(t, func() { judge.Rubric[map[string]string, string](grader, &judge.RubricOptions[map[string]string]{}) })
	require.NotPanics(t, func() { judge.Rubric[int, string](grader, nil) })
}

func TestRubricGradesDefaultToTheBestPassing(t *testing.T) {
	t.Parallel()
	answer := "GRADE: P"
	m := judge.ModelFunc(func(context.Context, judge.Request) (judge.Response, error) {
		return judge.Response{Text: answer, StopReason: judge.StopEnd}, nil
	})
	e := &harness.Episode[string]{Sample: dataset.Sample[string]{ID: "x", Input: "q"}}
	cpi := map[string]float64{"c": 1, "p": 0.5, "i": 0}
	v, err := judge.Rubric[string, string](m, &judge.RubricOptions[string]{Grades: cpi}).Judge(context.Background(), e, "o")
	require.NoError(t, err)
	require.False(t, v.Pass, "PassAt 0 means the best grade's score")
	require.Equal(t, 0.5, v.Score)
	v, err = judge.Rubric[string, string](m, &judge.RubricOptions[string]{Grades: cpi, PassAt: 0.5}).Judge(context.Background(), e, "o")
	require.NoError(t, err)
	require.True(t, v.Pass)
	answer = "GRADE: C"
	v, err = judge.Rubric[string, string](m, &judge.RubricOptions[string]{Grades: cpi}).Judge(context.Background(), e, "o")
	require.NoError(t, err)
	require.True(t, v.Pass)
}

// FuzzParseGrade feeds the grade reader arbitrary answers: it never
// panics, and it either returns a verdict whose score is one of the grades
// and whose reason holds no grade line, or an unscored error.
func FuzzParseGrade(f *testing.F) {
	for _, s := range []string{"The answer matches.\nGRADE: C", "Wrong.\nGRADE: I\n", "ok\r\n  GRADE:  C  \r\n",
		"GRADE: C\nGRADE: I", "I would give GRADE: C here.", "", "GRADE: X", "GRADE: P", "**GRADE: C**", "GRADE:\n", "\xff\nGRADE: c"} {
		f.Add(s, judge.StopEnd)
	}
	f.Add("GRADE: C", judge.StopMaxTokens)
	f.Add("no", "content_filter")
	grades := map[string]float64{"C": 1, "P": 0.5, "I": 0}
	f.Fuzz(func(t *testing.T, text, stop string) {
		v, err := judge.ParseGrade(judge.Response{Text: text, StopReason: stop}, grades, 1)
		if err != nil {
			if !errors.Is(err, judge.ErrUnscored) {
				t.Fatalf("error %v is not unscored", err)
			}
			return
		}
		if v.Score != 1 && v.Score != 0.5 && v.Score != 0 {
			t.Fatalf("score %v is no grade's", v.Score)
		}
		if v.Pass != (v.Score >= 1) || v.Scores["grade"] != v.Score {
			t.Fatalf("inconsistent verdict %+v", v)
		}
		if len(v.Reason) > 600 {
			t.Fatalf("reason of %d bytes is not shortened", len(v.Reason))
		}
	})
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
	zero := 0.0
	r := judge.Rubric[question, string](m, &judge.RubricOptions[question]{Template: tmpl,
		Reference: func(q question) string { return q.Answer },
		System:    "be strict", Temperature: &zero, MaxTokens: 300})
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
	require.Equal(t, harness.Usage{InputTokens: 120, OutputTokens: 8, CostUSD: 0.001, Model: "m-1"}, e.Usage(), "usage reaches the episode, named by the model that answered")
}

func TestRubricDefaultTemplateAndErrors(t *testing.T) {
	t.Parallel()
	var prompt string
	m := judge.ModelFunc(func(_ context.Context, req judge.Request) (judge.Response, error) {
		prompt = req.Messages[0].Content
		return judge.Response{Text: "no verdict", StopReason: judge.StopEnd}, nil
	})
	r := judge.Rubric[string, string](m, &judge.RubricOptions[string]{Reference: func(s string) string { return "REF" }})
	e := &harness.Episode[string]{Sample: dataset.Sample[string]{ID: "x", Input: "QUESTION"}}
	_, err := r.Judge(context.Background(), e, "OUTPUT")
	require.ErrorIs(t, err, judge.ErrUnscored, "an unreadable grade is unscored, not a failure")
	for _, s := range []string{"QUESTION", "REF", "OUTPUT", "GRADE: C"} {
		require.True(t, strings.Contains(prompt, s), "prompt lacks %q", s)
	}

	down := judge.ModelFunc(func(context.Context, judge.Request) (judge.Response, error) {
		return judge.Response{}, &judge.APIError{Provider: "openai", StatusCode: 503}
	})
	e = &harness.Episode[string]{Sample: dataset.Sample[string]{ID: "x", Input: "q"}}
	_, err = judge.Rubric[string, string](down, nil).Judge(context.Background(), e, "o")
	require.Error(t, err)
	require.NotErrorIs(t, err, judge.ErrUnscored, "a grader outage is an error")
	require.ErrorContains(t, err, "judge: rubric: openai: HTTP 503")
	require.Len(t, e.Events(), 1)
	require.NotEmpty(t, e.Events()[0].Error)

	// A template that cannot render fails alike on every try: permanent.
	bad := template.Must(template.New("t").Parse("{{.Input.Missing}}"))
	_, err = judge.Rubric[string, string](m, &judge.RubricOptions[string]{Template: bad}).Judge(context.Background(), e, "o")
	var p interface{ Permanent() bool }
	require.True(t, errors.As(err, &p) && p.Permanent(), "%v", err)

	// An unscored error of the model (a response too large) stays unscored.
	tooLarge := judge.ModelFunc(func(context.Context, judge.Request) (judge.Response, error) {
		return judge.Response{}, judge.Unscored("response too large")
	})
	_, err = judge.Rubric[string, string](tooLarge, nil).Judge(context.Background(), e, "o")
	require.ErrorIs(t, err, judge.ErrUnscored)

	require.PanicsWithValue(t, "judge: Rubric: set RubricOptions.Task to say what of a judge_test.question input the grader sees "+
		"(the default template shows only string, number or bool inputs whole, lest an answer key reach the grader)", func() {
		judge.Rubric[question, string](m, nil)
	}, "options the default template cannot honour safely fail when the judge is built")
}
