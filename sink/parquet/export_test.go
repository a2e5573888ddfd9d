package parquet

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
