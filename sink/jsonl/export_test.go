package jsonl

import "github.com/proctor-evals/proctor/internal/recordjson"

// SetChunkSize makes the parallel readers cut logs into chunks of n bytes,
// so that small test logs cross chunk boundaries; it returns the old size.
func SetChunkSize(n int) int {
	old := recordjson.ChunkSize
	recordjson.ChunkSize = n
	return old
}

// SetSync makes w's fsyncs call f instead of fsync(2), for faults.
func SetSync(w *Writer, f func() error) {
	w.mu.Lock()
	w.syncFile = f
	w.mu.Unlock()
}

// Closing reports whether Close has begun on w.
func Closing(w *Writer) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}
