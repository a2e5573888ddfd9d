package parquetsink

import (
	"bytes"
	"iter"

	"github.com/proctor-evals/proctor/sink"
)

// CloseFile closes the writer's open file under its feet, as a failing disk
// would, once the background write (if any) is done: the next write to the
// file fails, in the background.
func CloseFile(w *Writer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fail(w.wait())
	if w.f != nil {
		w.f.Close()
	}
}

// RecordsFrom reads the records of one Parquet file held in b, as Records
// does from a file named name.
func RecordsFrom(b []byte, name string) iter.Seq2[sink.Record, error] {
	return func(yield func(sink.Record, error) bool) {
		readFrom(bytes.NewReader(b), name, yield)
	}
}
