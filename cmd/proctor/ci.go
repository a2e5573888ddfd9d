package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/eval/report/ci"
	"github.com/proctor-evals/proctor/internal/atomicfile"
	"github.com/proctor-evals/proctor/internal/safeopen"
)

// reportCI is what proctor report writes for CI besides the report:
// JUnit XML to a file, GitHub workflow annotations before the report.
type reportCI struct {
	junit  *string
	github *bool
	file   *string
}

func ciFlags(fs *flag.FlagSet) *reportCI {
	return &reportCI{
		junit:  fs.String("junit", "", "write the report of one RUN as JUnit XML to `file`: a test case per sample, failures with their reasons and transcript links, flaky samples marked"),
		github: fs.Bool("github", false, "print GitHub Actions annotations before the report: an error per failing sample, a warning per flaky one"),
		file:   fs.String("github-file", "", "with -github, attach the annotations to this repository `file`"),
	}
}

func (c *reportCI) check(pos []string) error {
	if *c.junit != "" && len(pos) != 1 {
		return usageError("-junit writes the report of one RUN, got %d", len(pos))
	}
	if *c.file != "" && !*c.github {
		return usageError("-github-file goes with -github")
	}
	return nil
}

// maxFailures is the report's failure limit: all of them when CI output
// lists each sample's reasons.
func (c *reportCI) maxFailures() int {
	if *c.junit != "" || *c.github {
		return 1 << 30
	}
	return 0
}

func (c *reportCI) write(stdout io.Writer, log string, rep *report.Report) error {
	if *c.github {
		if err := ci.WriteAnnotations(stdout, rep, &ci.AnnotationOptions{Log: log, File: *c.file}); err != nil {
			return err
		}
	}
	if *c.junit == "" {
		return nil
	}
	if err := replaceable(*c.junit, ci.JUnitMark); err != nil {
		return err
	}
	return atomicfile.Write(*c.junit, 0o644, func(w *bufio.Writer) error {
		return ci.WriteJUnit(w, rep, &ci.JUnitOptions{Log: log})
	})
}

// replaceable returns nil when path does not exist or begins (in its
// first KiB) with mark, which proctor writes: a file of anyone else's is
// never overwritten.
func replaceable(path, mark string) error {
	f, err := safeopen.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("not replacing %s: %w", path, err)
	}
	defer f.Close()
	head := make([]byte, 1024)
	n, _ := io.ReadFull(f, head)
	if !bytes.Contains(head[:n], []byte(mark)) {
		return fmt.Errorf("%s exists and is not a file proctor wrote: not replacing it", path)
	}
	return nil
}

// compareComment is proctor compare's -pr-comment.
type compareComment struct {
	on     bool
	key    *string
	runURL *string
}

func commentFlags(fs *flag.FlagSet) *compareComment {
	c := &compareComment{}
	fs.BoolFunc("pr-comment", "print the comparison as a pull-request comment (Markdown with a hidden marker, so that a CI step can update it in place)", func(string) error {
		c.on = true
		return nil
	})
	c.key = fs.String("pr-key", "", "with -pr-comment, the `key` that tells this comparison's comment apart from others on the pull request (default: the head's eval)")
	c.runURL = fs.String("run-url", "", "with -pr-comment, the CI run to link (default: the GitHub Actions run, from GITHUB_SERVER_URL, GITHUB_REPOSITORY and GITHUB_RUN_ID)")
	return c
}

func (c *compareComment) write(w io.Writer, cmp *report.Comparison, headLog string) error {
	url := *c.runURL
	if url == "" {
		server, repo, run := os.Getenv("GITHUB_SERVER_URL"), os.Getenv("GITHUB_REPOSITORY"), os.Getenv("GITHUB_RUN_ID")
		if server != "" && repo != "" && run != "" {
			url = strings.TrimSuffix(server, "/") + "/" + repo + "/actions/runs/" + run
		}
	}
	return ci.WriteComment(w, cmp, &ci.CommentOptions{Key: *c.key, RunURL: url, HeadLog: headLog})
}
