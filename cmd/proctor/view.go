package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/proctor-evals/proctor/internal/atomicfile"
	"github.com/proctor-evals/proctor/internal/loopback"
	"github.com/proctor-evals/proctor/internal/safeopen"
	"github.com/proctor-evals/proctor/view"
)

var viewCommand = &command{
	name:  "view",
	args:  "[LOG|DIR]...",
	short: "serve a web viewer of runs",
	long: `
View serves a web viewer of the runs in each LOG and in each DIR (its
*.jsonl logs, two levels deep; the current directory by default) and
prints its URL. Pages: the runs, newest first, with their pass rate over
time; a run's report with its charts (pass rate, pass@k, by tag, latency,
cost, episodes over time, errors); a comparison of two runs, paired by
sample; each sample's records and transcripts. A run still being written
updates live.

It binds to 127.0.0.1 on a free port unless -addr says otherwise; it only
reads (GET and HEAD), and serves nothing outside the logs given. On a
loopback address it also refuses requests for another host name (DNS
rebinding). Stop it with Ctrl-C.

With -trace-url, records' OpenTelemetry trace IDs link to a trace viewer:
-trace-url 'http://localhost:16686/trace/{trace_id}' for Jaeger.

With -review, it also serves the review page of one LOG, whose queue
'proctor review pick' drew: the next episode to grade, with its input,
output and transcript; the judge's verdict hidden until graded (unless
-show-verdict); keyboard shortcuts. It prints the page's address, which
carries a secret every grade must present; grades are taken only from a
loopback host name and the same origin. Grades are appended to
LOG.reviews.jsonl.`,
	flags: func(fs *flag.FlagSet) func([]string, io.Writer, io.Writer) (int, error) {
		addr := fs.String("addr", "127.0.0.1:0", "listen on `host:port` (port 0: a free one)")
		traceURL := fs.String("trace-url", "", "link trace IDs to this URL `template` ({trace_id}, {span_id})")
		reviewMode := fs.Bool("review", false, "serve the review page of the one LOG given (writes its reviews)")
		showVerdict := fs.Bool("show-verdict", false, "with -review, show the judge's verdict before grading")
		return func(pos []string, stdout, stderr io.Writer) (int, error) {
			if len(pos) == 0 && !*reviewMode {
				pos = []string{"."}
			}
			opts := &view.Options{TraceURL: *traceURL}
			if *reviewMode {
				if err := wantArgs(pos, 1, 1, "one LOG with -review"); err != nil {
					return 0, err
				}
				opts.Review = &view.ReviewOptions{Log: pos[0], Secret: view.NewSecret(), ShowVerdict: *showVerdict}
			} else if *showVerdict {
				return 0, usageError("-show-verdict goes with -review")
			}
			v, err := view.New(pos, opts)
			if err != nil {
				return 0, err
			}
			ln, err := net.Listen("tcp", *addr)
			if err != nil {
				return 0, err
			}
			srv := &http.Server{Handler: loopback.Guard(v, ln.Addr()), ReadHeaderTimeout: 10 * time.Second}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			go func() {
				<-ctx.Done()
				v.Close() // end the live streams, then the server
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				srv.Shutdown(sctx)
			}()
			fmt.Fprintf(stdout, "proctor view: serving %s at http://%s/\n", strings.Join(pos, " "), ln.Addr())
			if r := opts.Review; r != nil {
				fmt.Fprintf(stdout, "proctor view: review %s at http://%s/review?key=%s\n", r.Log, ln.Addr(), r.Secret)
			}
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return 0, err
			}
			return 0, nil
		}
	},
}

// htmlGenerator marks the files report -html writes, so that it replaces
// its own earlier output and nothing else.
const htmlGenerator = `<meta name="generator" content="proctor view">`

// writeHTMLReport is report -html OUT LOG: the run page as one
// self-contained file, written beside OUT and renamed over it, so that OUT
// is whole or untouched.
func writeHTMLReport(pos []string, out string) (int, error) {
	if err := wantArgs(pos, 1, 1, "one LOG with -html"); err != nil {
		return 0, err
	}
	if st, err := os.Stat(pos[0]); err == nil && (st.IsDir() || strings.HasSuffix(pos[0], ".parquet")) {
		return 0, usageError("-html reads a JSONL log, not Parquet")
	}
	if f, err := safeopen.Open(out); err == nil {
		head := make([]byte, 1024)
		n, _ := io.ReadFull(bufio.NewReader(f), head)
		f.Close()
		if !bytes.Contains(head[:n], []byte(htmlGenerator)) {
			return 0, fmt.Errorf("%s exists and is not a report proctor wrote: not replacing it", out)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("not replacing %s: %w", out, err)
	}
	err := atomicfile.Write(out, 0o644, func(w *bufio.Writer) error { return view.WriteHTML(w, pos[0], nil) })
	if err != nil {
		return 0, fmt.Errorf("%s: %w", pos[0], err)
	}
	return 0, nil
}
