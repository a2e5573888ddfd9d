package view

// SetChunkSize sets how much of a log one worker folds at a time, and
// returns the old size: tests fold small logs in many chunks.
func SetChunkSize(n int) int {
	old := chunkSize
	chunkSize = n
	return old
}
