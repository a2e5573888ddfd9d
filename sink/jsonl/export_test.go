package jsonl

import "github.com/proctor-evals/proctor/internal/recordjson"

// SetChunkSize makes the parallel readers cut logs into chunks of n bytes,
// so that small test logs cross chunk boundaries; it returns the old size.
func SetChunkSize(n int) int {
	old := recordjson.ChunkSize
	recordjson.ChunkSize = n
	return old
}
