package eval

import (
	"bytes"
	"context"
	"flag"
	"io"
	"math"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/judge"
	"github.com/proctor-evals/proctor/sink"
)

// A duration lands in a bucket whose midpoint is within 12.5 % of it, and
// buckets grow with durations: quantiles read from them are that close.
func TestDurationBucketsAreWithinAnEighth(t *testing.T) {
	t.Parallel()
	prev := 0
	for ms := 0.07; ms < 1e8; ms *= 1.01 {
		i := durationBucket(ms)
		require.GreaterOrEqual(t, i, prev, "buckets grow with durations (%v ms)", ms)
		prev = i
		mid := bucketMidMS(i)
		require.InEpsilon(t, ms, mid, 0.125, "%v ms in bucket %d (mid %v)", ms, i, mid)
	}
	require.Equal(t, 0, durationBucket(0))
	require.Equal(t, 0, durationBucket(1e-9))
	require.Equal(t, durBuckets-1, durationBucket(1e12))
	require.Equal(t, durBuckets-1, durationBucket(math.Inf(1)))
	require.Equal(t, durBuckets-1, durationBucket(math.NaN()))
}

func TestETAWaitsForEnoughEpisodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		concurrency int
		total, want int64
	}{
		{"at least 20", 4, 1000, 20},
		{"two waves of a large concurrency", 64, 10_000, 128},
		{"a concurrency above the run counts as the run", 5000, 100_000, 10_000},
		{"at most half a run smaller than two waves", 5000, 1000, 500},
		{"a tiny run waits for 20 (or never shows one)", 16, 30, 20},
	} {
		require.Equal(t, tc.want, etaAfter(tc.concurrency, tc.total), tc.name)
	}

	var tl tally
	for i := range 19 {
		tl.add(&sink.Record{Status: sink.Pass, DurationMS: float64(1000 * (i + 1))})
	}
	eta, _, _ := estimateETA(&tl, tl.timed(), 100, 4, 20)
	require.False(t, eta.Known(), "19 of the 20 needed: no ETA")
	tl.add(&sink.Record{Status: sink.Pass, DurationMS: 20_000})
	eta, _, _ = estimateETA(&tl, tl.timed(), 100, 4, 20)
	require.True(t, eta.Known(), "20 finished: an ETA")
	eta, _, _ = estimateETA(&tl, tl.timed(), 0, 4, 20)
	require.False(t, eta.Known(), "nothing left: no ETA")
}

// On a known distribution the range is remaining × median and × p90 over
// the concurrency, within the histogram's resolution; the last episodes
// take at least one duration whatever the concurrency.
func TestETARangeOnASyntheticDistribution(t *testing.T) {
	t.Parallel()
	var tl tally
	// Durations 1 s … 100 s, ten of each: median 50 s, p90 90 s; a long
	// tail of an uneven agent run.
	for rep := range 10 {
		for s := 1; s <= 100; s++ {
			tl.add(&sink.Record{Status: []sink.Status{sink.Pass, sink.Fail}[rep%2], DurationMS: float64(s) * 1000})
		}
	}
	eta, med, p90 := estimateETA(&tl, tl.timed(), 400, 10, 20)
	require.InEpsilon(t, 50*time.Second, med, 0.125)
	require.InEpsilon(t, 90*time.Second, p90, 0.125)
	require.InEpsilon(t, (400*50/10)*time.Second, eta.Low, 0.125)
	require.InEpsilon(t, (400*90/10)*time.Second, eta.High, 0.125)
	require.Less(t, eta.Low, eta.High)

	eta, _, _ = estimateETA(&tl, tl.timed(), 3, 10, 20)
	require.InEpsilon(t, 50*time.Second, eta.Low, 0.125, "3 left at concurrency 10: one median, not 3/10 of one")
	require.InEpsilon(t, 90*time.Second, eta.High, 0.125)
}

func TestGoTestWithoutVerboseIsQuiet(t *testing.T) {
	t.Parallel()
	lookup := func(v string) func(string) *flag.Flag {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		if v != "" {
			fs.String("test.v", v, "")
		}
		return fs.Lookup
	}
	require.False(t, goTestQuiet(lookup("")), "not a test binary: a line")
	require.True(t, goTestQuiet(lookup("false")), "go test: none")
	require.False(t, goTestQuiet(lookup("true")), "go test -v: a line")
	require.True(t, goTestQuiet(lookup("test2json")), "go test -json: none")
}

func sampleProgress() Progress {
	return Progress{Eval: "agent", Total: 5000, Done: 1234, Resumed: 100, Running: 16,
		Pass: 1000, Fail: 120, Error: 10, Unscored: 4, Elapsed: 3*time.Minute + 12*time.Second,
		PerMinute: 312, InputTokens: 1_234_567, OutputTokens: 34_000, CostUSD: 3.41,
		ETA:     ETA{Low: 12 * time.Minute, High: 31*time.Minute + 5*time.Second},
		Longest: []RunningEpisode{{SampleID: "t17", Epoch: 2, Attempt: 1, Elapsed: 14 * time.Minute}}}
}

func TestProgressLine(t *testing.T) {
	t.Parallel()
	p := sampleProgress()
	require.Equal(t, "proctor: agent: 1234/5000 (100 resumed) · 16 running · 1000 pass 120 fail 10 error 4 unscored · "+
		"ETA 12m–31m · 312/min · $3.41 · 3m12s · tokens 1.2M in 34k out · longest t17 epoch 2 attempt 1 14m", p.String())

	// A small cost is not rounded away.
	small := p
	small.CostUSD = 0.0042
	require.Contains(t, small.String(), " · $0.0042 · ")

	// Cut to a width, the least useful parts go first, never the count.
	for _, width := range []int{120, 100, 80, 60, 40, 20} {
		line := p.line(width)
		require.LessOrEqual(t, utf8.RuneCountInString(line), width, line)
		require.Contains(t, line, "proctor: agent: 1234/5000"[:min(width, 25)], line)
	}
	require.Contains(t, p.line(80), "ETA", "the ETA outranks the running count, statuses, rate, cost and tokens")
	require.Contains(t, p.line(150), "longest", "the longest running episode outranks the rate")
	require.NotContains(t, p.line(150), "tokens")

	p.Longest[0].Elapsed = 3 * time.Second
	require.NotContains(t, p.String(), "longest", "an episode running for seconds is ordinary")
}

// On a terminal the line is rewritten in place at every snapshot, cut to
// the terminal's width, and stays when the run ends.
func TestProgressOnATerminalUpdatesOneLine(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	start := time.Unix(1000, 0)
	pr := newProgressPrinter(&buf, true, 72, start)
	p := sampleProgress()
	pr.print(p, start.Add(time.Second))
	p.Done = 1300
	pr.print(p, start.Add(2*time.Second))
	out := buf.String()
	require.NotContains(t, out, "\n", "in place: no new line while the run goes on")
	frames := strings.Split(out, "\r")[1:]
	require.Len(t, frames, 2, out)
	for _, f := range frames {
		require.True(t, strings.HasSuffix(f, "\x1b[K"), "each update clears what a longer line left: %q", f)
		require.LessOrEqual(t, utf8.RuneCountInString(strings.TrimSuffix(f, "\x1b[K")), 71, "never wraps: %q", f)
	}
	require.Contains(t, frames[1], "1300/5000")

	p.Final, p.Done, p.Running = true, 5000, 0
	pr.print(p, start.Add(3*time.Second))
	require.True(t, strings.HasSuffix(buf.String(), "\x1b[K\n"), "the last line stays")
	require.Contains(t, buf.String(), "5000/5000")
}

// Elsewhere a plain line every plainProgressEvery, and a last one.
func TestProgressElsewhereWritesAPlainLineAtAnInterval(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	start := time.Unix(1000, 0)
	pr := newProgressPrinter(&buf, false, 0, start)
	p := sampleProgress()
	for s := 1; s <= 25; s++ { // snapshots every second for 25 s
		p.Done = int64(1000 + s)
		pr.print(p, start.Add(time.Duration(s)*time.Second))
	}
	p.Final = true
	pr.print(p, start.Add(26*time.Second))
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	require.Len(t, lines, 3, "at 10 s, at 20 s, and the end: %q", buf.String())
	require.Contains(t, lines[0], "1010/5000")
	require.Contains(t, lines[1], "1020/5000")
	require.Contains(t, lines[2], "1025/5000")
	require.NotContains(t, buf.String(), "\r")
	require.NotContains(t, buf.String(), "\x1b")

	// A run that ends before its first line leaves nothing.
	for _, terminal := range []bool{false, true} {
		var quick bytes.Buffer
		pr := newProgressPrinter(&quick, terminal, 80, start)
		pr.print(Progress{Total: 3, Done: 3, Final: true}, start.Add(300*time.Millisecond))
		require.Empty(t, quick.String(), "terminal %v", terminal)
	}
}

// The recorder's tally counts what it commits and what a resumed log
// held, and a snapshot reads it while the recorder runs.
func TestProgressCountsWhatTheRecorderCommits(t *testing.T) {
	t.Parallel()
	const total = 40
	done := newDoneSet(total)
	agg := report.NewIndexed(nil, total, func(i int) (string, map[string]string) { return "s", nil })
	rec := newRecorder(done, epochsOnly(1), agg, func(err error) { t.Error(err) })
	rec.start(nil)
	r := &run{evalName: "e", start: time.Now(), total: total, owned: total, done: done, rec: rec}
	tr := newProgressTracker(r, &Config{Concurrency: 4, MaxCostUSD: 20, MaxTokens: 1000})

	p := tr.snapshot(time.Now(), false)
	require.Equal(t, Progress{Eval: "e", Total: total, Elapsed: p.Elapsed, Budget: &Budget{MaxCostUSD: 20, MaxTokens: 1000}}, p, "nothing yet")
	statuses := []sink.Status{sink.Pass, sink.Pass, sink.Fail, sink.Error, sink.Unscored}
	for i := range 30 {
		rec.commit(&finished{sample: i, rec: sink.Record{Status: statuses[i%5], DurationMS: 2000,
			InputTokens: 10, OutputTokens: 1, CostUSD: 0.5}})
	}
	require.Eventually(t, func() bool { return tr.snapshot(time.Now(), false).Done == 30 }, 5*time.Second, time.Millisecond)
	// The recorder publishes its tally at the end of its batch: a snapshot
	// taken after every record was written sees them all.
	p = tr.snapshot(time.Now(), false)
	require.Equal(t, [4]int64{12, 6, 6, 6}, [4]int64{p.Pass, p.Fail, p.Error, p.Unscored})
	require.Equal(t, [2]int64{300, 30}, [2]int64{p.InputTokens, p.OutputTokens})
	require.InDelta(t, 15, p.CostUSD, 1e-9)
	// The budgets, and what the committed records spent of them.
	require.InDelta(t, 5, p.Budget.LeftUSD(), 1e-9)
	require.Equal(t, int64(670), p.Budget.LeftTokens())
	// Every episode cost $0.50: the 10 left will cost $5 more, exactly.
	require.InDelta(t, 20, p.ProjectedCostUSD.Low, 1e-9)
	require.InDelta(t, 20, p.ProjectedCostUSD.High, 1e-9)
	require.Contains(t, p.String(), "$5.00 of $20.00 left")
	require.Contains(t, p.String(), "670 of 1.0k tokens left")
	require.Contains(t, p.String(), "projected ~$20.00")
	require.True(t, p.ETA.Known(), "30 of 40 finished, more than the 20 needed")
	require.InEpsilon(t, 2*time.Second, p.Median, 0.125)
	require.Greater(t, p.PerMinute, 0.0)

	require.NoError(t, rec.close(context.Background()))
	p = tr.snapshot(time.Now(), true)
	require.Equal(t, int64(30), p.Done)
	require.True(t, p.Final)
	require.False(t, p.ETA.Known(), "no ETA in the final snapshot")
}

// BenchmarkTallyAdd is what progress adds to the recorder's serial path
// per record (plus an atomic load per batch).
func BenchmarkTallyAdd(b *testing.B) {
	var tl tally
	recs := []sink.Record{{Status: sink.Pass, DurationMS: 0.02}, {Status: sink.Fail, DurationMS: 1500, InputTokens: 900, OutputTokens: 80, CostUSD: 0.01}}
	for i := 0; b.Loop(); i++ {
		tl.add(&recs[i&1])
	}
	if tl.timed() == 0 {
		b.Fatal("nothing counted")
	}
}

// progressEval has n samples; a harness that sleeps latency and passes.
func progressEval(n int, latency time.Duration) *Eval[string, string] {
	var d dataset.Slice[string]
	for i := range n {
		d = append(d, dataset.Sample[string]{ID: "s" + string(rune('a'+i%26)) + strings.Repeat("x", i/26), Input: "x"})
	}
	return &Eval[string, string]{Name: "progress", Dataset: d,
		Harness: harness.Func[string, string](func(ctx context.Context, ep *harness.Episode[string]) (string, error) {
			select {
			case <-time.After(latency):
			case <-ctx.Done():
			}
			return "ok", nil
		}),
		Judge: judge.Func[string, string](func(_ context.Context, _ *harness.Episode[string], out string) (judge.Verdict, error) {
			return judge.Verdict{Pass: out == "ok", Score: 1}, nil
		}),
	}
}

// Under `go test` a run prints no progress unless -v is given (then, a
// plain line: the test's output is not a terminal); Quiet prints none.
// Not parallel: it swaps os.Stderr.
func TestNoProgressLineUnderGoTestWithoutVerbose(t *testing.T) {
	saved, savedEvery := os.Stderr, plainProgressEvery
	t.Cleanup(func() { os.Stderr, plainProgressEvery = saved, savedEvery })
	plainProgressEvery = 20 * time.Millisecond

	capture := func(quiet bool) string {
		rd, wr, err := os.Pipe()
		require.NoError(t, err)
		os.Stderr = wr
		got := make(chan string)
		go func() {
			b, _ := io.ReadAll(rd)
			got <- string(b)
		}()
		_, err = progressEval(8, 60*time.Millisecond).Run(context.Background(),
			Config{Concurrency: 2, ProgressEvery: 10 * time.Millisecond, Quiet: quiet, Report: report.Options{Resamples: -1}})
		os.Stderr = saved
		wr.Close()
		out := <-got
		rd.Close()
		require.NoError(t, err)
		return out
	}
	require.Empty(t, capture(true), "Quiet: no line")
	out := capture(false)
	if testing.Verbose() {
		require.Contains(t, out, "proctor: progress: ", "go test -v: progress lines")
		require.Contains(t, out, "8/8", "the last line says the run is done")
		require.NotContains(t, out, "\r", "a pipe is not a terminal")
	} else {
		require.Empty(t, out, "go test without -v: no line")
	}
}
