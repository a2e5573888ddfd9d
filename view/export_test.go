package view

import "github.com/proctor-evals/proctor/internal/recordjson"

// SetChunkSize sets how much of a log one worker folds at a time, and
// returns the old size: tests fold small logs in many chunks.
func SetChunkSize(n int) int {
	old := recordjson.ChunkSize
	recordjson.ChunkSize = n
	return old
}
