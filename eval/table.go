package eval

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// table builds the text and Markdown forms of reports and comparisons:
// tab-separated rows aligned by a tabwriter, or Markdown tables.
type table struct {
	b  strings.Builder
	md bool
}

func (t *table) row(cells ...string) {
	if t.md {
		t.b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	} else {
		t.b.WriteString(strings.Join(cells, "\t") + "\n")
	}
}

func (t *table) header(cells ...string) {
	t.row(cells...)
	if t.md {
		t.b.WriteString(strings.Repeat("|---", len(cells)) + "|\n")
	}
}

func (t *table) title(s string) {
	if t.md {
		fmt.Fprintf(&t.b, "\n### %s\n\n", s)
	} else {
		fmt.Fprintf(&t.b, "\n%s\n", s)
	}
}

// line writes a line of prose (a list item in Markdown).
func (t *table) line(s string) {
	if t.md {
		t.b.WriteString("- " + s + "\n")
	} else {
		t.b.WriteString(s + "\n")
	}
}

func (t *table) printf(format string, args ...any) { fmt.Fprintf(&t.b, format, args...) }

func (t *table) writeTo(out io.Writer) error {
	if t.md {
		_, err := io.WriteString(out, t.b.String())
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	io.WriteString(tw, t.b.String())
	return tw.Flush()
}
