package cluster

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/cli"
	"github.com/proctor-evals/proctor/internal/loopback"
	"github.com/proctor-evals/proctor/view"
)

// Main runs e as a command with four subcommands, and exits:
//
//	myeval run        [run flags]   one machine (cli.Main's run)
//	myeval coordinate -log L [-listen 127.0.0.1:4222 | -nats URL] [-replicas N] [-keep] [run flags]
//	myeval work       -join nats://host:port -run-id ID [-concurrency N]   (token in $PROCTOR_TOKEN)
//	myeval gc         -nats URL [-idle D] [-dry-run]
//
// coordinate prints the work command that joins it on stderr and the
// report on stdout; it exits 0 when the run is complete and 1 when it
// stopped (budget, error rate, interrupt: the same log resumes). work
// exits 0 when the run is done and 1 otherwise. Bad usage exits 2.
func Main[T, O any](e *eval.Eval[T, O], cfg eval.Config) {
	ctx, stop := eval.InterruptContext(context.Background())
	code := MainArgs(ctx, e, cfg, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// MainArgs is Main with its arguments and outputs given: it returns the
// exit status instead of exiting.
func MainArgs[T, O any](ctx context.Context, e *eval.Eval[T, O], cfg eval.Config, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "coordinate":
			return coordinateCommand(ctx, e, cfg, args[1:], stdout, stderr)
		case "work":
			return workCommand(ctx, e, cfg, args[1:], stderr)
		case "gc":
			return gcCommand(ctx, args[1:], stdout, stderr)
		case "help", "-h", "-help", "--help":
			fmt.Fprintf(stdout, "usage:\n  %[1]s run [flags]          run on this machine\n  %[1]s coordinate -log L ...  serve the run to workers\n  %[1]s work -join URL ...     work for a coordinator\n  %[1]s gc -nats URL ...       remove finished or abandoned runs' streams from a server\n\n%[1]s COMMAND -h lists a command's flags.\n", prog())
			return 0
		}
	}
	return cli.MainArgs(ctx, e, cfg, args, stdout, stderr)
}

func coordinateCommand[T, O any](ctx context.Context, e *eval.Eval[T, O], cfg eval.Config, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("coordinate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cli.BindFlags(fs, &cfg)
	var o CoordinatorOptions
	fs.StringVar(&o.Listen, "listen", "", "`host:port` the embedded NATS server listens on (default 127.0.0.1:4222; 0.0.0.0:4222 for other machines)")
	fs.StringVar(&o.Token, "token", "", "`token` workers present to the embedded server, or the coordinator to -nats's (default $PROCTOR_TOKEN; else, embedded, the one in the token file beside the log, made at the run's first start)")
	fs.StringVar(&o.NATS, "nats", "", "`URL` of an external NATS server with JetStream, instead of the embedded one")
	creds := fs.String("creds", os.Getenv("PROCTOR_CREDS"), "NATS credentials `file` the coordinator presents to -nats (default $PROCTOR_CREDS)")
	fs.StringVar(&o.WorkerCredsFile, "worker-creds", "", "the workers' NATS credentials `file`, named in the printed work command")
	fs.StringVar(&o.TLSCAFile, "tls-ca", os.Getenv("PROCTOR_TLS_CA"), "CA `file` to verify -nats's TLS certificate, named in the printed work command (default $PROCTOR_TLS_CA)")
	fs.StringVar(&o.StoreDir, "store", "", "`dir` of the embedded server's streams (default beside the log: x.jsonl → x.nats)")
	fs.DurationVar(&o.SyncEvery, "sync-every", 0, "fsync the embedded server's streams at this `interval` instead of every write (e.g. 50ms: a power cut may lose the interval's results, which reconciliation runs again)")
	fs.Int64Var(&o.MaxStore, "max-store", 0, "bound the embedded server's store to this many `bytes` (0: the disk); a full store pauses the run")
	fs.IntVar(&o.Replicas, "replicas", 0, "copies JetStream keeps of the run's streams (default: the cluster's size up to 3, 1 on one server; never lowered)")
	fs.BoolVar(&o.Keep, "keep", false, "keep a completed run's streams, buckets and embedded store for inspection (default: removed; gc removes them later)")
	fs.DurationVar(&o.AckWait, "ack-wait", 30*time.Second, "how long a worker may hold work without a heartbeat")
	fs.DurationVar(&o.ReconcileEvery, "reconcile", 10*time.Second, "how often lost work is queued again")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	viewAddr := fs.String("view", "", "serve the run's live viewer on `host:port` (e.g. 127.0.0.1:8080)")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if cfg.Log == "" {
		fmt.Fprintf(stderr, "%s coordinate: -log is required: the log is the run's truth\n", prog())
		return 2
	}
	if o.Token == "" {
		o.Token = os.Getenv("PROCTOR_TOKEN") // read here, not as the flag's default: -h would print it
	}
	if err := o.check(); err != nil {
		fmt.Fprintf(stderr, "%s coordinate: %v\n", prog(), err)
		return 2
	}
	o.NATSOptions = natsOptions(*creds, o.TLSCAFile)
	c, err := StartCoordinator(ctx, e, cfg, &o)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog(), err)
		return 1
	}
	fmt.Fprintf(stderr, "%s: coordinating run %s; workers join with:\n  %s\n", prog(), c.RunID(), joinCommand(c, o.Token != ""))
	if *viewAddr != "" {
		stop, url, err := serveView(*viewAddr, cfg.Log, func() []view.GovernorLane { return c.governor(ctx) })
		if err != nil {
			fmt.Fprintf(stderr, "%s: the viewer: %v\n", prog(), err)
		} else {
			defer stop()
			fmt.Fprintf(stderr, "%s: the run's viewer: %s\n", prog(), url)
		}
	}
	rep, err := c.Wait(ctx)
	return cli.PrintOutcome(stdout, stderr, rep, err, *asJSON)
}

// joinCommand is the work command to print: it names where the token is,
// never the token.
func joinCommand(c *Coordinator, tokenGiven bool) string {
	cmd := prog() + " " + strings.Join(c.JoinArgs(), " ")
	switch {
	case c.TokenFile() != "":
		return "PROCTOR_TOKEN=$(cat " + c.TokenFile() + ") " + cmd
	case tokenGiven:
		return cmd + "\n  with $PROCTOR_TOKEN set to the coordinator's token"
	}
	return cmd
}

func workCommand[T, O any](ctx context.Context, e *eval.Eval[T, O], cfg eval.Config, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("work", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o WorkerOptions
	fs.StringVar(&o.Join, "join", "", "`URL` of the run's NATS server (nats://host:port), as the coordinator printed")
	fs.StringVar(&cfg.RunID, "run-id", cfg.RunID, "the `ID` of the run to join, as the coordinator printed")
	fs.StringVar(&o.Token, "token", "", "the workers' `token` (default $PROCTOR_TOKEN)")
	creds := fs.String("creds", os.Getenv("PROCTOR_CREDS"), "NATS credentials `file` (default $PROCTOR_CREDS)")
	ca := fs.String("tls-ca", os.Getenv("PROCTOR_TLS_CA"), "CA `file` to verify the server's TLS certificate (default $PROCTOR_TLS_CA)")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "episodes in flight on this machine")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound of one attempt (negative: none)")
	fs.IntVar(&cfg.Retries, "retries", cfg.Retries, "retries of an episode that ended in error (negative: none)")
	fs.IntVar(&cfg.Epochs, "epochs", cfg.Epochs, "runs per sample (default: the run's)")
	fs.Func("seed", "the run `seed` (default: the run's)", func(v string) error {
		s, err := strconv.ParseUint(v, 10, 64)
		cfg.Seed = s
		return err
	})
	fs.BoolVar(&cfg.Quiet, "quiet", cfg.Quiet, "no progress line on stderr")
	fs.DurationVar(&o.WaitFor, "wait", 0, "how long to wait for the server and the run to appear (a worker started before its coordinator); default: fail at once")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if o.Join == "" {
		fmt.Fprintf(stderr, "%s work: -join is required\n", prog())
		return 2
	}
	if o.Token == "" {
		o.Token = os.Getenv("PROCTOR_TOKEN")
	}
	// The run's seed and epochs are the coordinator's unless given here.
	o.AdoptRunShape = true
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "seed" || f.Name == "epochs" {
			o.AdoptRunShape = false
		}
	})
	o.NATSOptions = natsOptions(*creds, *ca)
	if err := Work(ctx, e, cfg, &o); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog(), err)
		return 1
	}
	return 0
}

func gcCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("nats", "", "`URL` of the NATS server")
	token := fs.String("token", "", "`token` to present (default $PROCTOR_TOKEN)")
	creds := fs.String("creds", os.Getenv("PROCTOR_CREDS"), "NATS credentials `file` (default $PROCTOR_CREDS)")
	ca := fs.String("tls-ca", os.Getenv("PROCTOR_TLS_CA"), "CA `file` to verify the server's TLS certificate (default $PROCTOR_TLS_CA)")
	idle := fs.Duration("idle", 7*24*time.Hour, "also remove runs nothing wrote to for this `long` (abandoned; 0: never)")
	dry := fs.Bool("dry-run", false, "list the runs and what would be removed, remove nothing")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if *server == "" {
		fmt.Fprintf(stderr, "%s gc: -nats is required\n", prog())
		return 2
	}
	if *token == "" {
		*token = os.Getenv("PROCTOR_TOKEN")
	}
	opts := append(natsOptions(*creds, *ca), nats.CustomInboxPrefix(coordinatorInbox))
	if *token != "" {
		opts = append(opts, nats.Token(*token))
	}
	nc, err := dial(*server, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog(), err)
		return 1
	}
	defer nc.Close()
	runs, err := GC(ctx, nc, *idle, *dry)
	for _, r := range runs {
		state := "live"
		switch {
		case r.Removed:
			state = "removed"
		case r.abandonedOrDone(*idle):
			state = "would be removed"
		}
		fmt.Fprintf(stdout, "%s\tdone=%v\tworkers=%v\tlast write %s\t%s\n", r.ID, r.Done, r.Live, r.LastUse.UTC().Format(time.RFC3339), state)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog(), err)
		return 1
	}
	return 0
}

func parse(fs *flag.FlagSet, args []string, stderr io.Writer) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s %s: unexpected arguments %q\n", prog(), fs.Name(), fs.Args())
		return 2, false
	}
	return 0, true
}

func natsOptions(creds, ca string) []nats.Option {
	var o []nats.Option
	if creds != "" {
		o = append(o, nats.UserCredentials(creds))
	}
	if ca != "" {
		o = append(o, nats.RootCAs(ca))
	}
	return o
}

func prog() string {
	if len(os.Args) > 0 {
		return filepath.Base(os.Args[0])
	}
	return "eval"
}

// serveView serves the viewer of the coordinator's log: one view of the
// whole run, following it live as results arrive from the workers.
func serveView(addr, log string, governor func() []view.GovernorLane) (stop func(), url string, err error) {
	v, err := view.New([]string{log}, &view.Options{Governor: governor})
	if err != nil {
		return nil, "", err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		v.Close()
		return nil, "", err
	}
	// The check proctor view makes: on a loopback address, a loopback
	// host name only (DNS rebinding).
	srv := &http.Server{Handler: loopback.Guard(v, l.Addr()), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	return func() {
		v.Close()
		srv.Close()
	}, "http://" + l.Addr().String() + "/", nil
}
