// Package benchlog writes the logs proctor's benchmarks read.
package benchlog

import (
	"context"
	"strconv"
	"time"

	"github.com/proctor-evals/proctor/sink"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// Write1M writes the 1M-record log of the scale target at path: 100k
// samples × 10 epochs over two tags (report's P7 shape), realistic lines
// (input, output, transcript link, usage, about 420 bytes each).
func Write1M(path string) error { return Write(path, 100_000, 10) }

// Write writes a log of samples × epochs records as Write1M does, epoch
// after epoch.
func Write(path string, samples, epochs int) error {
	w, err := jsonl.Create(path, nil)
	if err != nil {
		return err
	}
	start := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	tags := make([]map[string]string, 85)
	for i := range tags {
		tags[i] = map[string]string{"difficulty": strconv.Itoa(i % 5), "repo": "r" + strconv.Itoa(i%17)}
	}
	n := 0
	for ep := range epochs {
		for s := range samples {
			st, score, kind := sink.Fail, 0.0, sink.ErrorKind("")
			switch {
			case (s*7+ep*3)%10 < 6:
				st, score = sink.Pass, 1
			case (s+ep)%97 == 0:
				st, kind = sink.Error, sink.KindTimeout
			}
			r := sink.Record{Schema: 1, RunID: "20261122T120000Z-abcdef01", Eval: "bench", SampleID: "t" + strconv.Itoa(s), Epoch: ep,
				Status: st, Score: score, ErrorKind: kind, Tags: tags[s%85],
				Input:     []byte(`{"prompt":"what is ` + strconv.Itoa(s) + `+1?","expected":"` + strconv.Itoa(s+1) + `"}`),
				Output:    []byte(`"` + strconv.Itoa(s+1) + `"`),
				StartedAt: start.Add(time.Duration(n) * time.Millisecond), DurationMS: float64(s%997) + 0.5,
				InputTokens: 120, OutputTokens: 8, CostUSD: 0.0001 * float64(1+s%7), Seed: uint64(n) * 0x9e3779b97f4a7c15,
				Transcript: "bench.jsonl.traces.jsonl#" + strconv.Itoa(n*300)}
			if err := w.Write(context.Background(), r); err != nil {
				w.Close(context.Background())
				return err
			}
			n++
		}
	}
	return w.Close(context.Background())
}
