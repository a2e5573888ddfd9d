//go:build race

package eval

// raceEnabled: the race detector adds allocations (sync.Pool drops some of
// what is put back), so allocation counts are not checked under it.
const raceEnabled = true
