// Package ci writes a run's report and a comparison of two runs where CI
// systems read them: JUnit XML ([WriteJUnit]), GitHub workflow annotations
// ([WriteAnnotations]) and a pull-request comment that a CI step updates in
// place ([WriteComment]). It reads eval/report and links nothing of the
// engine; `proctor report -junit`, `-github` and `proctor compare
// -pr-comment` are its command line.
package ci

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// clipText returns s cut to at most n bytes on a rune boundary, saying how
// much was cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "… (" + strconv.Itoa(len(s)-cut) + " bytes more)"
}

// oneLine folds white space, control characters included, to single
// spaces: a sample ID or reason that would break a line-based format.
func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return r < 0x20 || r == 0x7f || r == ' ' || r == '\u2028' || r == '\u2029' || r == 0x85
	}), " ")
}
