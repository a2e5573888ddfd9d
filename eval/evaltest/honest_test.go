package evaltest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/cli"
	"github.com/proctor-evals/proctor/eval/evaltest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/judge/openai"
	"github.com/proctor-evals/proctor/scorer"
	"github.com/proctor-evals/proctor/view"
)

// grader is an OpenAI-compatible Chat Completions server that is down
// (503, as a gateway in front of a dead backend answers) or answers in a
// form the rubric cannot read. It checks that what it is sent is a chat
// completion request.
func grader(t *testing.T, mode string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model    string `json:"model"`
			Messages []struct{ Role, Content string }
		}
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/chat/completions" || json.Unmarshal(b, &req) != nil || req.Model == "" || len(req.Messages) == 0 {
			t.Errorf("the grader got %s %s %s", r.Method, r.URL.Path, b)
		}
		w.Header().Set("Content-Type", "application/json")
		switch mode {
		case "down":
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":{"message":"upstream connect error or disconnect/reset before headers","type":"server_error","code":null}}`)
		case "garbled":
			fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1741569952,"model":"gpt-4o-mini-2024-07-18",
"choices":[{"index":0,"message":{"role":"assistant","content":"The answer looks about right to me."},"finish_reason":"stop"}],
"usage":{"prompt_tokens":120,"completion_tokens":9,"total_tokens":129}}`)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// cascadeEval is the eval of the issue: an agent right on 231 of 250
// samples (92.4%), judged by an exact match that settles passes and a
// model grader behind it for the rest.
func cascadeEval(graderURL string) *eval.Eval[question, string] {
	var d dataset.Slice[question]
	for i := range 250 {
		d = append(d, dataset.Sample[question]{ID: fmt.Sprintf("q%d", i), Input: question{i, 7}})
	}
	agent := harness.Func[question, string](func(_ context.Context, ep *harness.Episode[question]) (string, error) {
		q := ep.Sample.Input
		ep.AddEvent(harness.Event{Kind: "model", Usage: harness.Usage{InputTokens: 50, OutputTokens: 5, CostUSD: 0.001, Model: "agent-model"}})
		if q.A%13 == 5 { // 19 of the 250
			return "I believe it is " + strconv.Itoa(q.A+q.B+1), nil
		}
		return strconv.Itoa(q.A + q.B), nil
	})
	ref := func(q question) string { return strconv.Itoa(q.A + q.B) }
	model := openai.New(&openai.Options{BaseURL: graderURL + "/v1", APIKey: "k", Model: "gpt-4o-mini"})
	rubric := judge.Rubric[question, string](model, &judge.RubricOptions[question]{
		Task: func(q question) any { return fmt.Sprintf("%d + %d", q.A, q.B) }, Reference: ref})
	return &eval.Eval[question, string]{Name: "cascade", Dataset: d, Harness: agent,
		Judge: judge.Cascade(scorer.Exact(ref), rubric, judge.PassSettles)}
}

// TestCascadeWithItsGraderDownFailsTheGate is the report: the
// grader of a cascade unreachable, every suspected failure became an
// error, and errors left out of the pass rate made a 92.4% agent read as
// 100.0% [99.5%, 100.0%] and pass its gate. Now the worst case stands
// beside the pass rate, the errors are counted where they came from, the
// gate fails unless told to exclude errors, and the command exits 1.
func TestCascadeWithItsGraderDownFailsTheGate(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"down", "garbled"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			e := cascadeEval(grader(t, mode).URL)
			log := filepath.Join(t.TempDir(), "run.jsonl")
			cfg := eval.Config{Log: log, Retries: 1, Backoff: time.Millisecond, Quiet: true}
			rec := &recorder{TB: t}
			rep := evaltest.Run(rec, e, cfg, evaltest.Gate{MinLowerBound: 0.95})

			// The pass rate over scored episodes is still 100%: only the
			// suspected failures reached the grader.
			require.Equal(t, 231, rep.Passed)
			require.Equal(t, 0, rep.Failed)
			require.Equal(t, 1.0, rep.PassRate)
			status, kind, word := "error", "judge", "errored"
			if mode == "garbled" {
				status, kind, word = "unscored", "", "unscored"
				require.Equal(t, 19, rep.Unscored)
			} else {
				require.Equal(t, 19, rep.Errored)
			}
			// Beside it, the worst case: 231 of 250.
			wc := rep.WorstCase
			require.NotNil(t, wc)
			require.Equal(t, 19, wc.NoVerdict)
			require.InDelta(t, 0.924, wc.Lower.PassRate, 1e-12)
			require.Less(t, wc.Lower.Interval.Lo, 0.924)
			require.Greater(t, wc.Lower.Interval.Hi, 0.924)
			require.Equal(t, 1.0, wc.Upper.PassRate)
			require.True(t, wc.Over, "7.6%% without a verdict is over the 5%% a report allows")
			// Where they came from, first.
			require.Len(t, rep.ErrorSources, 1)
			src := rep.ErrorSources[0]
			require.Equal(t, "judge/cascade.expensive/rubric", src.Source)
			require.Equal(t, 19, src.Count)
			require.Equal(t, status, string(src.Status))
			require.Equal(t, kind, string(src.Kind))
			if mode == "down" {
				require.Contains(t, src.First, "HTTP 503")
			} else {
				require.Contains(t, src.First, "no GRADE line")
				require.Equal(t, int64(19*120), rep.JudgeUsage.InputTokens, "the grader's tokens are the judge's")
			}
			require.Equal(t, "q5", src.SampleID)

			// The gate fails by default, saying why...
			require.Len(t, rec.errors, 1, "the gate fails on the worst case")
			msg := rec.errors[0]
			require.Contains(t, msg, "the worst case's lower bound")
			require.Contains(t, msg, "19 "+status+" from judge/cascade.expensive/rubric")
			// ...and still fails when told to exclude errors: the grader
			// gave no verdict on any of the 19 episodes it was called on.
			rec = &recorder{TB: t}
			evaltest.Check(rec, rep, evaltest.Gate{MinLowerBound: 0.95, ExcludeErrors: true, MaxErrorRate: 1})
			require.Len(t, rec.errors, 1)
			require.Contains(t, rec.errors[0], "the judge gave no verdict on any of its calls (judge/cascade.expensive/rubric)")
			require.NotContains(t, rec.errors[0], "lower bound")

			// The text report says it first; JSON and HTML carry it.
			text := rep.String()
			lines := strings.Split(text, "\n")
			require.True(t, strings.HasPrefix(lines[1], "WARNING: pass rate 100.0% [98.4%, 100.0%] of scored episodes — 19 "+word+" of 250: between 92.4% ["), lines[1])
			require.Contains(t, lines[3], "errored and unscored, by where they came from")
			require.Contains(t, lines[5], "judge/cascade.expensive/rubric")
			require.Contains(t, text, "worst case")
			b, err := json.Marshal(rep)
			require.NoError(t, err)
			var back report.Report
			require.NoError(t, json.Unmarshal(b, &back))
			require.Equal(t, rep.WorstCase, back.WorstCase)
			require.Equal(t, rep.ErrorSources, back.ErrorSources)
			var html bytes.Buffer
			require.NoError(t, view.WriteHTML(&html, log, nil))
			require.Contains(t, html.String(), `id="headline"`)
			require.Contains(t, html.String(), "between 92.4%")
			require.Contains(t, html.String(), "judge/cascade.expensive/rubric")

			// The command exits 1: too many episodes without a verdict; and
			// with that and the worst case told otherwise, still 1: the
			// grader never gave a verdict.
			run := func(args ...string) (int, string) {
				var out, errOut bytes.Buffer
				code := cli.MainArgs(t.Context(), e, eval.Config{Retries: 1, Backoff: time.Millisecond}, append([]string{"-log", log, "-quiet"}, args...), &out, &errOut)
				return code, errOut.String()
			}
			code, stderr := run()
			require.Equal(t, 1, code, stderr)
			require.Contains(t, stderr, "over -max-no-verdict")
			code, stderr = run("-max-no-verdict", "-1", "-min-lower-bound", "0.95", "-exclude-errors")
			require.Equal(t, 1, code, stderr)
			require.Contains(t, stderr, "judge/cascade.expensive/rubric gave no verdict on any of its 19 calls")
		})
	}
}
