// Online judges production traffic, one time window per run: it reads the
// OTLP JSON traces the OpenTelemetry Collector's file exporter wrote, keeps
// the GenAI operations of the window, replays their recorded outputs (no
// agent runs), judges them with asymmetric sampling (every suspected
// failure, a fraction of the rest) and sends each verdict back to the
// tracing backend as a gen_ai.evaluation.result event on the original
// span.
//
//	go run ./examples/online -traces examples/online/testdata/traces.jsonl -window 2026-11-23T10:00:00Z
//
// From cron, hourly, judging the hour before:
//
//	5 * * * *  online -traces /var/otel/traces.jsonl -dir /var/proctor/runs
//
// The run ID and log derive from the window, so a re-run of the same
// window (a retried job, a crash) resumes: nothing is judged, or paid for,
// twice. With OTEL_EXPORTER_OTLP_ENDPOINT (or the _TRACES_ and _LOGS_
// variants) set, verdict events and the episodes' traces go there over
// OTLP/HTTP.
//
// The expensive judge here is a stand-in so that the example runs without
// a key; in production it is a model-graded judge (judge.Rubric over
// judge/openai or judge/anthropic).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/proctor-evals/proctor/dataset/otlp"
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/harness/replay"
	"github.com/proctor-evals/proctor/judge"
)

// job is one run of the online evaluation.
type job struct {
	Traces string        // the OTLP JSON file
	Window replay.Window // the traffic judged
	Dir    string        // where run logs go
	Rate   float64       // the share of suspected successes the expensive judge sees
	Seed   uint64        // the sampling seed: fixed, so that a re-run samples the same episodes
}

const evalName = "support-bot"

// suspect is the cheap first look: an empty answer, or one that
// apologizes, is a suspected failure.
var suspect = judge.Func[replay.Case, json.RawMessage](func(_ context.Context, _ *harness.Episode[replay.Case], out json.RawMessage) (judge.Verdict, error) {
	text := strings.ToLower(string(out))
	if text == "null" || strings.Contains(text, "sorry") {
		return judge.Fail("suspected: empty or apologetic answer"), nil
	}
	return judge.Pass("looks fine"), nil
})

// grader stands in for a model-graded judge: a refusal fails.
var grader = judge.Func[replay.Case, json.RawMessage](func(_ context.Context, _ *harness.Episode[replay.Case], out json.RawMessage) (judge.Verdict, error) {
	if strings.Contains(strings.ToLower(string(out)), "cannot help") {
		return judge.Fail("the assistant refused a request it should handle"), nil
	}
	return judge.Pass("answers the question"), nil
})

// run judges the job's window. tracer and events, when not nil, receive
// the episodes' traces and the verdict events.
func run(ctx context.Context, j job, cfg eval.Config) (*report.Report, error) {
	e := &eval.Eval[replay.Case, json.RawMessage]{
		Name:    evalName,
		Dataset: j.Window.Filter(otlp.Traces(j.Traces, nil)),
		Harness: replay.Harness(),
		Judge:   judge.Subsample(suspect, grader, j.Rate, j.Seed),
	}
	cfg.RunID = j.Window.RunID(e.Name)
	cfg.Log = j.Window.Log(j.Dir, e.Name)
	cfg.Seed = j.Seed
	return e.Run(ctx, cfg)
}

// telemetry makes the OTLP/HTTP providers: to endpoint when given (a URL),
// else where the OTEL_EXPORTER_OTLP_* variables say. shutdown flushes them.
func telemetry(ctx context.Context, endpoint string) (tp *sdktrace.TracerProvider, lp *sdklog.LoggerProvider, shutdown func(context.Context) error, err error) {
	var traceOpts []otlptracehttp.Option
	var logOpts []otlploghttp.Option
	if endpoint != "" {
		traceOpts = append(traceOpts, otlptracehttp.WithEndpointURL(endpoint+"/v1/traces"))
		logOpts = append(logOpts, otlploghttp.WithEndpointURL(endpoint+"/v1/logs"))
	}
	te, err := otlptracehttp.New(ctx, traceOpts...)
	if err != nil {
		return nil, nil, nil, err
	}
	le, err := otlploghttp.New(ctx, logOpts...)
	if err != nil {
		return nil, nil, nil, errors.Join(err, te.Shutdown(ctx))
	}
	tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(te))
	lp = sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewBatchProcessor(le)))
	return tp, lp, func(ctx context.Context) error {
		return errors.Join(tp.Shutdown(ctx), lp.Shutdown(ctx))
	}, nil
}

func main() { os.Exit(mainCode()) }

// mainCode is main with deferred calls run (the telemetry flushed) before
// the exit.
func mainCode() int {
	traces := flag.String("traces", "", "the OTLP JSON `file` the Collector's file exporter writes (required)")
	window := flag.String("window", "", "the start of the window judged, RFC 3339 (default: the last full window)")
	length := flag.Duration("length", time.Hour, "the window's length")
	dir := flag.String("dir", filepath.Join(os.TempDir(), "proctor-online"), "the `directory` of run logs")
	rate := flag.Float64("rate", 0.05, "the share of suspected successes sent to the expensive judge, in (0, 1]")
	flag.Parse()
	if *traces == "" || *length <= 0 || !(*rate > 0 && *rate <= 1) {
		flag.Usage()
		return 2
	}
	j := job{Traces: *traces, Dir: *dir, Rate: *rate, Seed: 1, Window: replay.WindowAt(time.Now().Add(-*length), *length)}
	if *window != "" {
		start, err := time.Parse(time.RFC3339, *window)
		if err != nil {
			log.Printf("-window: %v", err)
			return 2
		}
		j.Window = replay.WindowAt(start, *length)
	}

	ctx, stop := eval.InterruptContext(context.Background())
	defer stop()
	var cfg eval.Config
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")+os.Getenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT") != "" {
		tp, lp, shutdown, err := telemetry(ctx, "")
		if err != nil {
			log.Print(err)
			return 1
		}
		defer func() {
			if err := shutdown(context.WithoutCancel(ctx)); err != nil {
				log.Printf("flushing telemetry: %v", err)
			}
		}()
		cfg.TracerProvider, cfg.LoggerProvider = tp, lp
	}
	rep, err := run(ctx, j, cfg)
	if rep != nil {
		rep.WriteText(os.Stdout)
		fmt.Printf("\nlog: %s\n", j.Window.Log(j.Dir, evalName))
	}
	if err != nil {
		log.Print(err)
		return 1
	}
	return 0
}
