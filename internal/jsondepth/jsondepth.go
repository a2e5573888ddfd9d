// Package jsondepth measures how deeply a JSON value nests, so that a
// writer refuses what a reader would: encoding/json (and so every reader
// of a log) rejects a document nested deeper than 10,000 levels, and a
// record adds one level around its input and output.
package jsondepth

import "bytes"

// Max is the deepest nesting of a record's input or output that proctor
// writes as it is: what the log's strict decoder follows, far below
// encoding/json's limit and within reach of readers with smaller stacks
// (Python's json module recurses once per level).
const Max = 512

// Exceeds reports whether the JSON value v nests arrays and objects more
// than max levels deep. v need not be valid: brackets are counted outside
// strings, which is the nesting of a valid value.
func Exceeds(v []byte, max int) bool {
	v = bytes.TrimLeft(v, " \t\r\n") // JSON's whitespace may come first
	if len(v) == 0 || v[0] != '[' && v[0] != '{' {
		return false // a scalar: the usual output
	}
	depth := 0
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '[', '{':
			if depth++; depth > max {
				return true
			}
		case ']', '}':
			depth--
		case '"':
			for i++; i < len(v) && v[i] != '"'; i++ {
				if v[i] == '\\' {
					i++
				}
			}
		}
	}
	return false
}
