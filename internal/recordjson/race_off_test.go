//go:build !race

package recordjson

const raceEnabled = false
