package replay_test

import (
	"fmt"
	"time"

	"github.com/proctor-evals/proctor/harness/replay"
)

// An hourly job judges the hour before; its run ID and log come from the
// window, so running it twice resumes the first run.
func ExampleWindowAt() {
	now := time.Date(2026, 11, 23, 11, 5, 0, 0, time.UTC) // cron fired at 11:05
	w := replay.WindowAt(now.Add(-time.Hour), time.Hour)
	fmt.Println(w.Start, w.End())
	fmt.Println(w.RunID("support-bot"))
	fmt.Println(w.Log("runs", "support-bot"))
	// Output:
	// 2026-11-23 10:00:00 +0000 UTC 2026-11-23 11:00:00 +0000 UTC
	// support-bot-2026-11-23T10-1h
	// runs/support-bot-2026-11-23T10-1h.jsonl
}
