package sandbox

import (
	"io/fs"
	"strings"
	"testing"
)

// FuzzClean: whatever an agent names, what reaches a driver is a valid
// io/fs path (or "."), and an escape is never let through.
func FuzzClean(f *testing.F) {
	for _, s := range []string{"", ".", "..", "..name", "a/../b", "a/../../b", "/etc", "a//b/", "./x", "a\x00b", "ünï cödé", "...", "../"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		c, err := clean(name)
		if err != nil {
			return
		}
		if !fs.ValidPath(c) {
			t.Fatalf("clean(%q) = %q: not a valid path", name, c)
		}
		if c == ".." || strings.HasPrefix(c, "../") || strings.HasPrefix(name, "/") {
			t.Fatalf("clean(%q) = %q: escapes", name, c)
		}
	})
}
