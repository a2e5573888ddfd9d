//go:build race

package eval_test

// raceEnabled: the race detector deepens every call, so stack sizes
// are not checked under it.
const raceEnabled = true
