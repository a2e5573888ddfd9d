package proctor_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestDocsLinksResolve: every relative link in README.md, CONTRIBUTING.md
// and docs/*.md names a file of the repository, and a #fragment a heading
// of the Markdown file it points into (as GitHub names its anchors).
func TestDocsLinksResolve(t *testing.T) {
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "README.md", "CONTRIBUTING.md")
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(text)) {
			if msg := checkLink(file, l.target); msg != "" {
				t.Errorf("%s:%d: link %q: %s", file, l.line, l.target, msg)
			}
		}
	}
}

// TestDocsLinkCheckFindsBrokenLinks: the check above can fail.
func TestDocsLinkCheckFindsBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "docs", "a.md")
	if err := os.MkdirAll(filepath.Dir(doc), 0o755); err != nil {
		t.Fatal(err)
	}
	text := "# A title, with `code`\n\n## Two words\n\n" +
		"[ok](b.md) [ok](a.md#two-words) [ok](#a-title-with-code) [ok](../README.md) [web](https://example.com/x.md)\n" +
		"[gone](docs/b.md) [gone](c.md) [no anchor](b.md#nowhere)\n" +
		"`[code](nowhere.md)`\n```\n[fenced](nowhere.md)\n```\n"
	for name, body := range map[string]string{doc: text, filepath.Join(dir, "docs", "b.md"): "# B\n", filepath.Join(dir, "README.md"): "x\n"} {
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var broken []string
	for _, l := range markdownLinks(text) {
		if checkLink(doc, l.target) != "" {
			broken = append(broken, fmt.Sprintf("%d:%s", l.line, l.target))
		}
	}
	want := "6:docs/b.md 6:c.md 6:b.md#nowhere"
	if got := strings.Join(broken, " "); got != want {
		t.Errorf("broken links = %q, want %q", got, want)
	}
}

type mdLink struct {
	line   int
	target string
}

var (
	linkRE     = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	codeSpanRE = regexp.MustCompile("`[^`]*`")
)

// markdownLinks lists the inline links of a Markdown text outside code
// spans and fenced code blocks.
func markdownLinks(text string) []mdLink {
	var links []mdLink
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(codeSpanRE.ReplaceAllString(line, ""), -1) {
			links = append(links, mdLink{i + 1, m[1]})
		}
	}
	return links
}

// checkLink says what is wrong with a link in the Markdown file from, or
// "" when it resolves or is not relative.
func checkLink(from, target string) string {
	u, err := url.Parse(target)
	if err != nil {
		return err.Error()
	}
	if u.Scheme != "" || u.Host != "" {
		return ""
	}
	path := from
	if u.Path != "" {
		path = filepath.Join(filepath.Dir(from), filepath.FromSlash(u.Path))
		if _, err := os.Stat(path); err != nil {
			return "no such file"
		}
	}
	if u.Fragment == "" || !strings.HasSuffix(path, ".md") {
		return ""
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if !headingAnchors(string(text))[u.Fragment] {
		return "no heading with anchor #" + u.Fragment + " in " + filepath.ToSlash(path)
	}
	return ""
}

// headingAnchors: the anchors GitHub gives the headings of a Markdown text:
// lower case, punctuation dropped, spaces as hyphens, -1, -2… on repeats.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		heading := strings.TrimLeft(line, "#")
		if fenced || len(heading) == len(line) || len(line)-len(heading) > 6 || !strings.HasPrefix(heading, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}
