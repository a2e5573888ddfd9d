package view

import (
	"fmt"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/internal/recordjson"
)

// SetChunkSize sets how much of a log one worker folds at a time, and
// returns the old size: tests fold small logs in many chunks.
func SetChunkSize(n int) int {
	old := recordjson.ChunkSize
	recordjson.ChunkSize = n
	return old
}

// Report returns the report the viewer holds of the log with the given ID,
// refreshed.
func (s *Server) Report(id string) (*report.Report, error) {
	s.mu.Lock()
	l := s.logs[id]
	s.mu.Unlock()
	if l == nil {
		return nil, fmt.Errorf("no log %q", id)
	}
	snap, err := l.snapshot()
	if err != nil {
		return nil, err
	}
	return snap.Report, nil
}
