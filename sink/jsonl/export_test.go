package jsonl

// SetChunkSize makes the parallel scan cut logs into chunks of n bytes, so
// that small test logs cross chunk boundaries; it returns the old size.
func SetChunkSize(n int) int {
	old := chunkSize
	chunkSize = n
	return old
}
