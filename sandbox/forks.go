package sandbox

import "sync"

// Forks counts an environment's open forks, for drivers: what an
// environment holds (a base directory, an image) must outlive both its
// Close and its last fork, whichever comes later. The zero value is ready.
type Forks struct {
	mu     sync.Mutex
	open   int
	closed bool
}

// Add registers a fork about to be made; after Close it returns ErrClosed.
func (f *Forks) Add() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	f.open++
	return nil
}

// Done unregisters a fork (closed, or failed to be made) and reports
// whether the environment's resources may be released now.
func (f *Forks) Done() (release bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.open--
	return f.closed && f.open == 0
}

// Close marks the environment closed and reports whether its resources
// may be released now; a second Close reports false.
func (f *Forks) Close() (release bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.closed = true
	return f.open == 0
}
