package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/cli"
	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/internal/distrib"
)

// WorkerOptions tune a worker. Join is required.
type WorkerOptions struct {
	// Join is the URL of the run's NATS server: nats://host:port.
	Join string
	// Token is what the coordinator's embedded server expects (it prints
	// it); credentials for an external server go in NATSOptions.
	Token       string
	NATSOptions []nats.Option
	// AdoptRunShape takes the run's seed and epochs from the coordinator's
	// manifest instead of cfg, so that a worker started with no flags
	// joins the run it is told to; the eval itself (name, dataset,
	// versions) must still match.
	AdoptRunShape bool
	// WaitFor bounds how long a worker waits for its server to answer and
	// its run to be served (a worker started before its coordinator); by
	// default it waits for neither: it fails at once with the cause.
	WaitFor time.Duration
	// ReconnectFor bounds how long a worker that lost its server keeps
	// trying before it gives up; default 2 minutes.
	ReconnectFor time.Duration
	// Logger receives warnings; default slog.Default().
	Logger *slog.Logger
}

// MismatchError is a worker whose eval is not the run's: it runs nothing.
type MismatchError struct{ Diffs []string }

func (e *MismatchError) Error() string {
	return "cluster: this worker's eval differs from the run's, refusing to work: " + joinDiffs(e.Diffs)
}

func joinDiffs(d []string) string {
	s := ""
	for i, x := range d {
		if i > 0 {
			s += "; "
		}
		s += x
	}
	return s
}

// compareManifests lists what differs between the run's manifest and a
// worker's.
func compareManifests(run, mine *manifest.Manifest) []string {
	var d []string
	add := func(what string, theirs, ours any) {
		if theirs != ours {
			d = append(d, fmt.Sprintf("%s: %v for the run, %v here", what, theirs, ours))
		}
	}
	add("eval", strconv.Quote(run.Eval), strconv.Quote(mine.Eval))
	add("dataset samples", run.Dataset.Samples, mine.Dataset.Samples)
	add("dataset hash", run.Dataset.Hash, mine.Dataset.Hash)
	add("harness version", strconv.Quote(run.Versions.Harness), strconv.Quote(mine.Versions.Harness))
	add("judge version", strconv.Quote(run.Versions.Judge), strconv.Quote(mine.Versions.Judge))
	add("sandbox version", strconv.Quote(run.Versions.Sandbox), strconv.Quote(mine.Versions.Sandbox))
	add("seed", run.Seed, mine.Seed)
	add("epochs", run.Epochs, mine.Epochs)
	add("variants", variantsString(run.Variants), variantsString(mine.Variants))
	return d
}

// resourcesDiff says how a worker's sandbox resources (its samples'
// limits and images) differ from the run's, or "" when they do not.
func resourcesDiff(run, mine *manifest.Manifest) string {
	if slices.Equal(run.Resources, mine.Resources) {
		return ""
	}
	return fmt.Sprintf("sandbox resources: %s for the run, %s here", manifest.ResourcesString(run.Resources), manifest.ResourcesString(mine.Resources))
}

// Work joins a run as a worker: it pulls the run's work while it has free
// slots (cfg.Concurrency), runs it with e.Work, publishes the results in
// batches and acknowledges the work once all its results are stored. It
// returns nil when the run is done, a *StopError when the coordinator
// stopped it, a *MismatchError (having run nothing) when e is not the
// run's eval, an *AuthError when the server refuses its credentials, and
// ctx's cause when ctx is done (its episodes in flight are cancelled and
// their work handed back at once). A server that cannot be reached or a
// run it does not have fails at once, unless o.WaitFor says to wait.
func Work[T, O any](ctx context.Context, e *eval.Eval[T, O], cfg eval.Config, opts *WorkerOptions) error {
	o, err := opts.withDefaults()
	if err != nil {
		return err
	}
	// This worker's manifest (its dataset read and hashed) is made while
	// it looks for its run: 16 workers starting with their coordinator
	// would otherwise hash their datasets at once, after it is up.
	type made struct {
		m   *manifest.Manifest
		err error
	}
	mine := make(chan made, 1)
	go func() {
		m, err := e.Manifest(ctx, cfg)
		mine <- made{m, err}
	}()
	w, err := connectRun(ctx, o, cfg.RunID)
	if err != nil {
		return err
	}
	defer w.nc.Close()
	ours := <-mine
	if ours.err != nil {
		return ours.err
	}
	cfg, err = join(ctx, w, ours.m, cfg, o)
	if err != nil || w.done {
		return err
	}
	cons, ackWait, err := w.open(ctx)
	if err != nil {
		return err
	}
	w.shareRateLimits(ctx, cfg)
	w.governor, _ = cfg.Models.(rateGoverned)
	defer w.shareCallStore(ctx, cfg)()
	return w.serve(ctx, cons, ackWait, func(ctx context.Context, in <-chan distrib.Assignment) error {
		cfg, spend, err := w.shareSpend(ctx, cfg)
		if err != nil {
			return err
		}
		return distrib.Work(e, ctx, cfg, spend, in, w.finished)
	})
}

func (opts *WorkerOptions) withDefaults() (WorkerOptions, error) {
	var o WorkerOptions
	if opts != nil {
		o = *opts
	}
	if o.Join == "" {
		return o, errors.New("cluster: a worker needs the server to join (-join nats://host:port)")
	}
	if o.ReconnectFor <= 0 {
		o.ReconnectFor = 2 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// connectRun connects to the server and finds the run (runID, or the
// run the server's latest coordinator serves): at once, or within
// o.WaitFor, saying what it waits for.
func connectRun(ctx context.Context, o WorkerOptions, runID string) (*worker, error) {
	const reconnectWait = 250 * time.Millisecond
	id := cli.WorkerID()
	w := &worker{
		log: o.Logger, id: id, join: o.Join, reconnectFor: o.ReconnectFor,
		batchIDs: workerKey(id) + "-" + newToken()[:12] + "-",
		held:     map[heldKey][]*held{}, sending: map[*nats.Msg]*batch{},
		slot: make(chan struct{}, 1), took: make(chan struct{}, 1), lost: make(chan struct{}),
	}
	var lostOnce sync.Once
	copts := append(workerInbox("proctor worker "+w.id),
		nats.MaxReconnects(int(o.ReconnectFor/reconnectWait)), nats.ReconnectWait(reconnectWait),
		nats.ClosedHandler(func(*nats.Conn) { lostOnce.Do(func() { close(w.lost) }) }))
	if o.Token != "" {
		copts = append(copts, nats.Token(o.Token))
	}
	copts = append(copts, o.NATSOptions...)
	what := func() string {
		switch {
		case w.nc == nil:
			return "the server at " + redactURL(o.Join)
		case runID == "":
			return "a run on " + redactURL(o.Join)
		}
		return "run " + runID + " on " + redactURL(o.Join)
	}
	var entry jetstream.KeyValueEntry
	err := waitFor(ctx, o, what, func() (err error, retry bool) {
		if w.nc == nil {
			nc, err := dial(o.Join, copts...)
			if errors.Is(err, nats.ErrNoServers) {
				return fmt.Errorf("%w (%v)", err, probe(o.Join)), true
			}
			if err != nil {
				return err, false
			}
			w.nc = nc
			if w.js, err = jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096), jetstream.WithPublishAsyncTimeout(publishTimeout),
				jetstream.WithPublishAsyncAckHandler(w.published), jetstream.WithPublishAsyncErrHandler(w.publishFailed)); err != nil {
				return fmt.Errorf("cluster: %w", err), false
			}
		}
		w.runID, entry, err = w.findRun(ctx, runID)
		return err, notYet(err)
	})
	if err != nil {
		if w.nc != nil {
			w.nc.Close()
		}
		return nil, err
	}
	if runID == "" {
		o.Logger.Warn("proctor: no -run-id: joining the run this server's latest coordinator serves", "run", w.runID)
	}
	w.joined = entry.Value()
	if err := json.Unmarshal(entry.Value(), &w.manifest); err != nil {
		w.nc.Close()
		return nil, fmt.Errorf("cluster: run %s: its manifest: %w", w.runID, err)
	}
	return w, nil
}

// join checks that mine, this worker's manifest, is the run's, and
// returns the configuration this worker runs it with; w.done is set when
// the run is done already.
func join(ctx context.Context, w *worker, mine *manifest.Manifest, cfg eval.Config, o WorkerOptions) (eval.Config, error) {
	m := &w.manifest
	cfg.RunID = w.runID
	if o.AdoptRunShape {
		var err error
		if cfg.Seed, err = strconv.ParseUint(m.Seed, 10, 64); err != nil {
			return cfg, fmt.Errorf("cluster: run %s: manifest seed %q: %w", w.runID, m.Seed, err)
		}
		cfg.Epochs = m.Epochs
		mine.Seed, mine.Epochs = m.Seed, m.Epochs // what cfg says now
	}
	if d := compareManifests(m, mine); len(d) > 0 {
		return cfg, &MismatchError{Diffs: d}
	}
	if r := resourcesDiff(m, mine); r != "" {
		// As a local resume under other resources: refused unless
		// allowed, and then the mix is on record (each record names its
		// sandbox's resources).
		if !cfg.AllowChanged {
			return cfg, &MismatchError{Diffs: []string{r + " (allow it with eval.Config.AllowChanged: each record names its resources)"}}
		}
		w.log.Warn("proctor: this worker's sandbox resources are not the run's: joining as allowed (AllowChanged); its records name theirs", "run", w.runID, "differs", r)
	}
	cfg, err := adoptGate(cfg, m)
	if err != nil {
		return cfg, fmt.Errorf("cluster: run %s: %w", w.runID, err)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = eval.DefaultConcurrency
	}
	cfg.Worker = w.id
	w.slots, w.epochs, w.quiet = cfg.Concurrency, max(m.Epochs, 1)*max(len(m.Variants), 1), cfg.Quiet
	if done, stop := w.control(ctx); done {
		w.done = true
		w.log.Info("proctor: run "+w.runID+" is done already: nothing to do", "server", redactURL(w.join))
		return cfg, nil
	} else if stop != nil {
		return cfg, stop
	}
	w.log.Info("proctor: joined run "+w.runID, "eval", m.Eval, "server", redactURL(w.join), "worker", w.id, "concurrency", cfg.Concurrency)
	return cfg, nil
}

// adoptGate gives a worker the run's sequential gate when its own config
// has none: under a gate an episode is drawn once (an error is not
// retried unless the agent never ran), and a worker started without the
// gate's flags would retry as an ungated run does.
func adoptGate(cfg eval.Config, m *manifest.Manifest) (eval.Config, error) {
	if cfg.EliminateVariants == 0 {
		// Elimination's rule is the gate's: an episode is drawn once.
		cfg.EliminateVariants = m.EliminateVariants
	}
	if cfg.Sequential != nil {
		return cfg, nil
	}
	seq, err := report.SequentialOf(m)
	if err != nil || seq == nil {
		return cfg, err
	}
	if seq.Baseline != "" && seq.Base == nil {
		// The workers' copy leaves the baseline's figures out: a worker
		// decides nothing, it needs the gate's retry rule only, and the
		// baseline's file need not be where it runs.
		seq.Base = map[string][2]float64{}
	}
	cfg.Sequential = seq
	return cfg, nil
}

// open looks up the run's liveness bucket, object store and the workers'
// consumer of its work queue.
func (w *worker) open(ctx context.Context) (jetstream.Consumer, time.Duration, error) {
	var err error
	if w.alive, err = w.js.KeyValue(ctx, w.n.workers); err != nil {
		return nil, 0, fmt.Errorf("cluster: run %s: %w", w.runID, err)
	}
	if w.blobs, err = w.js.ObjectStore(ctx, w.n.blobs); err != nil {
		return nil, 0, fmt.Errorf("cluster: run %s: %w", w.runID, err)
	}
	stream, err := w.js.Stream(ctx, w.n.work)
	if err != nil {
		return nil, 0, fmt.Errorf("cluster: run %s: the work queue: %w", w.runID, err)
	}
	cons, err := stream.Consumer(ctx, workConsumer)
	if err != nil {
		return nil, 0, fmt.Errorf("cluster: run %s: the workers' consumer: %w", w.runID, err)
	}
	return cons, cons.CachedInfo().Config.AckWait, nil
}

// serve works for the run until it is done or stopped, ctx is done or the
// server is lost: it listens to the control subject, heartbeats and
// reports (watch), pulls work into work, which runs it, and leaves.
func (w *worker) serve(ctx context.Context, cons jetstream.Consumer, ackWait time.Duration, work func(context.Context, <-chan distrib.Assignment) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w.ctx, w.cancel = ctx, cancel
	sub, err := w.nc.Subscribe(w.n.control, func(msg *nats.Msg) {
		var c controlMsg
		if json.Unmarshal(msg.Data, &c) != nil {
			return
		}
		// A worker exits 0 only on the done key, which only the
		// coordinator writes: "done" here says to read it now. A stop is
		// taken as it comes (a full store may refuse the stop key; a
		// forged stop costs a resume, never a record).
		switch c.Op {
		case "done":
			go w.checkControl(ctx)
		case "retired":
			go w.checkRetired(ctx)
		case "stop":
			cancel(&StopError{Reason: c.Reason})
		}
	})
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	defer sub.Unsubscribe()

	var bg sync.WaitGroup
	bg.Go(func() { w.watch(ctx, ackWait, w.lost) })
	assignments := make(chan distrib.Assignment, 64)
	workErr := make(chan error, 1)
	go func() { workErr <- work(ctx, assignments) }()
	w.pull(ctx, cons, assignments)
	err = <-workErr
	cancel(err) // stops watch if work ended on its own
	bg.Wait()
	w.leave()
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errDone):
		w.log.Info("proctor: run "+w.runID+" is done; leaving", "published", w.stored.Load())
		return nil
	case errors.Is(cause, errLost):
		if last := w.nc.LastError(); isAuthError(last) {
			return &AuthError{URL: w.join, Err: last}
		}
		return fmt.Errorf("cluster: lost the server at %s for %v (%d results published)", redactURL(w.join), w.reconnectFor, w.stored.Load())
	}
	return cause
}

// publishTimeout bounds the wait for the server to say it stored a batch:
// one lost on its way (a stream leader that died with it) is sent again
// then. A batch sent twice is stored once (its message ID), and its
// results logged once anyway.
const publishTimeout = 10 * time.Second

var (
	errDone = errors.New("cluster: the run is done")
	errLost = errors.New("cluster: lost the server")
)

// worker is one process's part of a run.
type worker struct {
	join         string // the server's URL
	runID        string
	manifest     manifest.Manifest // the run's
	joined       []byte            // the run's manifest as it was when this worker joined
	done         bool              // the run was done when it joined
	lost         chan struct{}     // closed when the connection is closed for good
	reconnectFor time.Duration
	nc           *nats.Conn
	js           jetstream.JetStream
	n            names
	kv           jetstream.KeyValue
	alive        jetstream.KeyValue
	blobs        jetstream.ObjectStore
	log          *slog.Logger
	id           string
	slots        int
	quiet        bool            // no progress line
	epochs       int             // the run's: the most episodes a work message carries
	ctx          context.Context // the worker's run: done when it leaves
	cancel       context.CancelCauseFunc
	governor     rateGoverned // its gateway's rate governor; nil: none

	mu       sync.Mutex
	running  int                  // episodes assigned and not yet finished
	unstored int                  // results finished and not yet stored
	storing  bool                 // the server stored the latest batch
	held     map[heldKey][]*held  // episodes running → the work message that carries them
	cur      *batch               // results to send once the batch being stored is
	inFlight int                  // batches being stored
	sent     int                  // batches sent: each one's message ID, after batchIDs
	batchIDs string               // this process's prefix of message IDs: a worker restarted with its host and PID reuses none
	sending  map[*nats.Msg]*batch // batches being published
	waiting  int                  // results refused by the server, to publish again
	refused  string               // why, the latest
	warned   time.Time            // when that was last logged
	msgs     map[*held]struct{}   // work messages not yet acked
	slot     chan struct{}        // signalled when running, unstored or waiting drops
	took     chan struct{}        // signalled when work is taken, to report it soon
	stored   atomic.Int64         // results published
	// retired are the run's variants (by place) whose sequential gate
	// decided or which were eliminated, as the retired key says: their
	// episodes are skipped.
	retired atomic.Pointer[[]bool]
}

type heldKey struct {
	sample string
	epoch  int
}

// held is a work message this worker holds: acked once each of its
// episodes has its result stored.
type held struct {
	msg  jetstream.Msg
	seq  uint64 // in the work stream
	left int
	tags map[int]string // epoch → its tag, returned with its result
}

// waitFor calls try until it succeeds, fails for good (retry false), ctx
// is done or o.WaitFor has passed (at once by default: a worker pointed
// at a dead server or an unknown run says so and exits), saying what it
// waits for, at once and every 10 s. It returns try's last error.
func waitFor(ctx context.Context, o WorkerOptions, what func() string, try func() (err error, retry bool)) error {
	start := time.Now()
	var told time.Time
	pause := 25 * time.Millisecond
	for {
		err, retry := try()
		switch {
		case err == nil:
			return nil
		case !retry:
			return err
		case o.WaitFor <= 0:
			return fmt.Errorf("cluster: %s: %w (-wait DURATION waits for it)", what(), err)
		case time.Since(start) > o.WaitFor:
			return fmt.Errorf("cluster: waited %v for %s: %w", o.WaitFor, what(), err)
		case time.Since(told) >= 10*time.Second:
			told = time.Now()
			o.Logger.Warn("proctor: waiting for "+what(), "since", start.Format(time.TimeOnly), "for", o.WaitFor, "err", err)
		}
		// Soon at first (a coordinator setting up), then every second.
		sleep(ctx, pause)
		pause = min(2*pause, time.Second)
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
	}
}

// probe returns why the first server of urls cannot be reached.
func probe(urls string) error {
	first, _, _ := strings.Cut(urls, ",")
	u, err := url.Parse(strings.TrimSpace(first))
	if err != nil {
		return err
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "4222")
	}
	c, err := net.DialTimeout("tcp", host, 2*time.Second)
	if err != nil {
		return err
	}
	c.Close()
	return errors.New("it accepts TCP connections, but not as a NATS server")
}

// findRun returns the run to join — runID, or the run the server's latest
// coordinator serves — and its manifest, and sets w.n and w.kv.
func (w *worker) findRun(ctx context.Context, runID string) (string, jetstream.KeyValueEntry, error) {
	if runID == "" {
		runs, err := w.js.KeyValue(ctx, runsBucket)
		if err != nil {
			return "", nil, fmt.Errorf("no coordinator serves a run on this server yet (%w)", err)
		}
		e, err := runs.Get(ctx, currentKey)
		if err != nil {
			return "", nil, fmt.Errorf("no coordinator serves a run on this server yet (%w)", err)
		}
		runID = string(e.Value())
	}
	w.n = namesFor(runID)
	// A run other than the server's latest may be unknown here (another
	// server's, or over and cleaned up), or not this worker's to read (an
	// embedded server grants its own run only): a short look says which.
	var latest string
	if runs, err := w.js.KeyValue(ctx, runsBucket); err == nil {
		if e, err := runs.Get(ctx, currentKey); err == nil {
			latest = string(e.Value())
		}
	}
	lctx := ctx
	if latest != "" && latest != runID {
		var cancel context.CancelFunc
		lctx, cancel = context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
	}
	kv, err := w.js.KeyValue(lctx, w.n.kv)
	if err != nil && latest != "" && latest != runID {
		return "", nil, fmt.Errorf("cluster: run %s is not on this server, or not this worker's to join (its latest is run %s; a finished run's streams are removed): %w", runID, latest, err)
	}
	if last := w.nc.LastError(); err != nil && errors.Is(last, nats.ErrPermissionViolation) {
		return "", nil, fmt.Errorf("cluster: the server refused this worker a subject of run %s (%w): grant the workers' credentials the permissions docs/distributed.md lists, with the run's ID for <ID>", runID, last)
	}
	if err != nil {
		return "", nil, fmt.Errorf("run %s is not on this server (%w)", runID, err)
	}
	w.kv = kv
	e, err := kv.Get(ctx, keyManifest)
	if err != nil {
		return "", nil, fmt.Errorf("run %s: its manifest: %w", runID, err)
	}
	return runID, e, nil
}

// notYet reports an error that a coordinator still setting up explains.
func notYet(err error) bool {
	return errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrKeyNotFound) ||
		errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrJetStreamNotEnabled)
}

// control reads the run's done and stop keys.
func (w *worker) control(ctx context.Context) (done bool, stop error) {
	if _, err := w.kv.Get(ctx, keyDone); err == nil {
		return true, nil
	}
	if e, err := w.kv.Get(ctx, keyStop); err == nil {
		var s stopNotice
		json.Unmarshal(e.Value(), &s)
		return false, &StopError{Reason: s.Reason}
	}
	return false, nil
}

// checkControl ends the worker's run when the run's done or stop key is
// set.
func (w *worker) checkControl(ctx context.Context) {
	if done, stop := w.control(ctx); done {
		w.cancel(errDone)
	} else if stop != nil {
		w.cancel(stop)
	}
}

// checkRetired reads the run's retired key: the variants whose gate
// decided or which were eliminated, whose episodes this worker no
// longer runs.
func (w *worker) checkRetired(ctx context.Context) {
	if len(w.manifest.Variants) == 0 {
		return
	}
	e, err := w.kv.Get(ctx, keyRetired)
	if err != nil {
		return
	}
	var n retiredNotice
	if json.Unmarshal(e.Value(), &n) != nil {
		return
	}
	out := make([]bool, len(w.manifest.Variants))
	for _, name := range n.Variants {
		for v, mv := range w.manifest.Variants {
			if mv.Name == name {
				out[v] = true
			}
		}
	}
	w.retired.Store(&out)
}

// unretired is the slots of epochs whose variant is not retired.
func (w *worker) unretired(epochs []int) []int {
	p := w.retired.Load()
	if p == nil {
		return epochs
	}
	perVariant := max(w.manifest.Epochs, 1)
	var out []int
	for _, slot := range epochs {
		if v := slot / perVariant; v >= len(*p) || !(*p)[v] {
			out = append(out, slot)
		}
	}
	return out
}

// checkManifest ends the worker's part when the run's coordinator started
// again on its log with another eval, dataset (samples removed), seed or
// epochs than this worker joined: it would refuse this worker, which now
// says so, hands back what it holds and leaves, instead of running work
// the coordinator removed, or with another seed.
func (w *worker) checkManifest(ctx context.Context) {
	e, err := w.kv.Get(ctx, keyManifest)
	if err != nil || bytes.Equal(e.Value(), w.joined) {
		return
	}
	var m manifest.Manifest
	if json.Unmarshal(e.Value(), &m) != nil {
		return
	}
	if d := compareManifests(&m, &w.manifest); len(d) > 0 {
		w.log.Warn("proctor: the run's coordinator started again with another eval: handing back what this worker holds and leaving", "run", w.runID, "differs", joinDiffs(d))
		w.cancel(&MismatchError{Diffs: d})
		return
	}
	w.joined = e.Value() // started again as it was
}

// pull fetches work while there are free slots, until ctx is done.
func (w *worker) pull(ctx context.Context, cons jetstream.Consumer, out chan<- distrib.Assignment) {
	defer close(out)
	for ctx.Err() == nil {
		w.mu.Lock()
		free := w.slots - w.busy()
		w.mu.Unlock()
		if free <= 0 {
			select {
			case <-w.slot:
			case <-ctx.Done():
			}
			continue
		}
		// A message carries up to a sample's epochs: fetch as many as fill
		// the free slots, so that the worker holds at most epochs-1 more.
		batch, err := cons.Fetch(min((free+w.epochs-1)/w.epochs, 256), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			if ctx.Err() == nil {
				w.log.Debug("proctor: fetching work", "err", err)
				sleep(ctx, 250*time.Millisecond)
			}
			continue
		}
		for msg := range batch.Messages() {
			w.take(ctx, msg, out)
			// What it holds is reported within 50 ms of its taking it, not
			// only every 2 s: if it dies, the coordinator can queue that
			// work again at once.
			select {
			case w.took <- struct{}{}:
			default:
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && ctx.Err() == nil {
			w.log.Debug("proctor: fetching work", "err", err)
			sleep(ctx, 250*time.Millisecond)
		}
	}
}

// take hands one work message's episodes to eval.Work.
func (w *worker) take(ctx context.Context, msg jetstream.Msg, out chan<- distrib.Assignment) {
	sampleID, err := w.n.parseWorkSubject(msg.Subject())
	var m workMsg
	if err == nil {
		m, err = decodeAssignment(msg.Data(), sampleID)
	}
	if err != nil {
		w.log.Warn("proctor: dropping a malformed work message", "subject", msg.Subject(), "err", err)
		msg.Term()
		return
	}
	a := m.Assignment
	tags := make(map[int]string, len(a.Epochs))
	for i, ep := range a.Epochs {
		tags[ep] = m.Tags[i]
	}
	// A retired variant is not run: its episodes are no longer pending,
	// so the coordinator queues them no more.
	if a.Epochs = w.unretired(a.Epochs); len(a.Epochs) == 0 {
		msg.Ack()
		return
	}
	// A redelivery runs every epoch again: a result another holder sent
	// first is the one logged (the coordinator drops the later one).
	h := &held{msg: msg, left: len(a.Epochs), tags: tags}
	if md, err := msg.Metadata(); err == nil {
		h.seq = md.Sequence.Stream
	}
	a.Refused = func(err error) { w.refuse(h, sampleID, a.Epochs, err) }
	w.mu.Lock()
	if w.msgs == nil {
		w.msgs = map[*held]struct{}{}
	}
	w.msgs[h] = struct{}{}
	for _, ep := range a.Epochs {
		k := heldKey{sampleID, ep}
		w.held[k] = append(w.held[k], h)
	}
	w.running += len(a.Epochs)
	w.mu.Unlock()
	select {
	case out <- a:
	case <-ctx.Done():
	}
}

// refuse drops work this worker cannot run (a sample its dataset lacks:
// forged, or queued by a coordinator of another dataset): no worker of
// this eval can, so it is terminated, not handed back.
func (w *worker) refuse(h *held, sampleID string, epochs []int, why error) {
	w.log.Warn("proctor: terminating work this worker cannot run", "sample", sampleID, "err", why)
	w.mu.Lock()
	for _, ep := range epochs {
		k := heldKey{sampleID, ep}
		if hs := slices.DeleteFunc(w.held[k], func(x *held) bool { return x == h }); len(hs) > 0 {
			w.held[k] = hs
		} else {
			delete(w.held, k)
		}
	}
	w.running -= len(epochs)
	delete(w.msgs, h)
	w.mu.Unlock()
	w.freed()
	h.msg.Term()
}

// finished adds an episode's result to the batch on its way; eval.Work
// calls it from many goroutines.
func (w *worker) finished(f distrib.Finished) {
	w.mu.Lock()
	h := w.release(heldKey{f.Record.SampleID, f.Slot})
	w.running--
	w.unstored++
	w.mu.Unlock()
	w.freed()
	r := &result{held: h}
	e := entry{SampleID: f.Record.SampleID, Epoch: f.Slot}
	if h != nil {
		e.Tag = h.tags[f.Slot]
	}
	body, err := encodeResult(make([]byte, 0, 1024), &f)
	if err != nil {
		w.log.Warn("proctor: a result cannot be encoded; its episode runs again elsewhere", "err", err)
		w.settle(r, false)
		return
	}
	if len(body) > maxInline {
		sum := sha256.Sum256(body)
		r.blob = body
		e.Blob = fmt.Sprintf("%s.%d.%s.%d", sampleKey(f.Record.SampleID), f.Slot, workerKey(w.id), time.Now().UnixNano())
		e.Digest = hex.EncodeToString(sum[:])
	} else {
		e.Body = body
	}
	r.entry = appendEntry(nil, &e)
	r.blobName = e.Blob
	w.add(r)
}

// release returns the work message that holds the episode k, and forgets
// it; w.mu is held.
func (w *worker) release(k heldKey) *held {
	hs := w.held[k]
	if len(hs) == 0 {
		return nil
	}
	h := hs[0]
	if len(hs) == 1 {
		delete(w.held, k)
	} else {
		w.held[k] = hs[1:]
	}
	return h
}

// result is a finished episode on its way to the server.
type result struct {
	held     *held
	entry    []byte // its entry in a batch
	blob     []byte // a body too big for its entry, stored as an object first
	blobName string
	attempts int
}

// batch is results sent in one message.
type batch struct {
	results  []*result
	body     []byte
	id       string // its message ID: a batch sent again is stored once
	attempts int
}

// add puts r in the batch on its way: sent at once when no batch is
// being stored, else when the one being stored is (a group commit: the
// results that finish during one fsync share the next), or when it is
// full. A result is never run again because the server could not store
// it: it is kept, and sent again (see retry).
func (w *worker) add(r *result) {
	if r.blob != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := w.blobs.PutBytes(ctx, r.blobName, r.blob)
		cancel()
		if err != nil {
			w.retry(1, err, &r.attempts, func() { w.add(r) }, func() { w.settle(r, false) })
			return
		}
		w.unrefused(1, r.attempts)
		r.blob = nil
	}
	w.mu.Lock()
	if w.cur == nil {
		w.cur = &batch{}
	}
	b := w.cur
	b.results = append(b.results, r)
	b.body = append(b.body, r.entry...)
	send := w.inFlight < batchesInFlight || len(b.body) >= batchBytes || len(b.results) >= batchEntries
	w.mu.Unlock()
	if send {
		w.flush()
	}
}

// flush sends the batch on its way, if any.
func (w *worker) flush() {
	w.mu.Lock()
	b := w.cur
	w.cur = nil
	if b != nil {
		w.sent++
		b.id = w.batchIDs + strconv.Itoa(w.sent)
	}
	w.mu.Unlock()
	if b != nil {
		w.send(b)
	}
}

// send publishes b. A full window of unacknowledged publishes waits
// (backpressure) rather than failing its results.
func (w *worker) send(b *batch) {
	msg := &nats.Msg{Subject: w.n.resultsSubject(w.id), Data: b.body, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, b.id)
	w.mu.Lock()
	w.sending[msg] = b
	w.inFlight++
	w.mu.Unlock()
	if _, err := w.js.PublishMsgAsync(msg, jetstream.WithStallWait(30*time.Second)); err != nil {
		w.publishFailed(w.js, msg, err)
	}
}

// published settles the results of a batch the server stored.
func (w *worker) published(_ jetstream.JetStream, msg *nats.Msg, _ *jetstream.PubAck) {
	w.mu.Lock()
	w.storing = true
	w.mu.Unlock()
	if b := w.unpublished(msg); b != nil {
		for _, r := range b.results {
			w.settle(r, true)
		}
		w.unrefused(len(b.results), b.attempts)
	}
}

// publishFailed sends a batch again later: the server did not store it (a
// full store, a server restarting).
func (w *worker) publishFailed(_ jetstream.JetStream, msg *nats.Msg, err error) {
	if b := w.unpublished(msg); b != nil {
		w.retry(len(b.results), err, &b.attempts, func() { w.send(b) }, func() {
			for _, r := range b.results {
				w.settle(r, false)
			}
		})
	}
}

// unpublished returns the batch msg carried, now stored or refused, and
// sends the results that finished meanwhile (from another goroutine: the
// client may call this holding its publisher's lock).
func (w *worker) unpublished(msg *nats.Msg) *batch {
	w.mu.Lock()
	b, ok := w.sending[msg]
	if ok {
		delete(w.sending, msg)
		w.inFlight--
	}
	next := w.cur != nil && w.inFlight < batchesInFlight
	w.mu.Unlock()
	if next {
		go w.flush()
	}
	return b
}

// retry calls again after a backoff (up to 10 s) that grows with
// *attempts, while the worker's run goes on, or giveUp when it has ended
// (the work is handed back). The n results it holds count as waiting from
// their first refusal until they are stored or given up (see unrefused), not
// only during a backoff: the coordinator, which reads the count from the
// worker's report, made at once, says the run is paused within seconds.
// Its work messages stay held (heartbeats go on), and the worker takes no
// new work while it holds refused results (see busy).
func (w *worker) retry(n int, err error, attempts *int, again, giveUp func()) {
	*attempts++
	first := *attempts == 1
	now := time.Now()
	w.mu.Lock()
	if first {
		w.waiting += n
	}
	w.storing = false
	w.refused = err.Error()
	warn := now.Sub(w.warned) >= 10*time.Second
	if warn {
		w.warned = now
	}
	waiting := w.waiting
	w.mu.Unlock()
	if warn {
		w.log.Warn("proctor: the server refuses results; keeping them and retrying", "waiting", waiting, "err", err)
	}
	if first {
		select { // report it now
		case w.took <- struct{}{}:
		default:
		}
	}
	time.AfterFunc(min(100*time.Millisecond<<min(*attempts, 7), 10*time.Second), func() {
		if w.ctx.Err() != nil {
			giveUp()
			w.unrefused(n, *attempts)
			return
		}
		again()
	})
}

// unrefused counts n results no longer waiting, stored (or given up) after
// attempts refusals.
func (w *worker) unrefused(n, attempts int) {
	if attempts == 0 {
		return
	}
	w.mu.Lock()
	w.waiting -= n
	if w.waiting == 0 {
		w.refused = ""
	}
	w.mu.Unlock()
	w.freed()
}

// busy is how many of its slots the worker may not fill now; w.mu is
// held. While the server stores its results, a slot frees up when its
// episode finishes: the next one runs while the result is stored (up to
// unstoredPerSlot results a slot, or a full batch, on their way), and a
// sample's epochs wait ready for the next free slots (no fetch between an
// episode's end and the next one's start). Before its first batch is
// stored, and from a refusal until one is stored again, a slot stays busy
// until its result is stored: a worker whose results the server refuses
// (a full store) takes no new work, and a full store costs at most the
// episodes it was running.
func (w *worker) busy() int {
	switch {
	case w.waiting > 0 || w.unstored >= max(unstoredPerSlot*w.slots, batchEntries):
		return w.slots
	case !w.storing:
		return w.running + w.unstored
	}
	return max(w.running-w.epochs, 0)
}

// freed tells pull that it may have free slots.
func (w *worker) freed() {
	select {
	case w.slot <- struct{}{}:
	default:
	}
}

// settle counts a result stored (or given up), and acks its work message
// once each of its episodes is stored, or hands it back at once.
func (w *worker) settle(r *result, stored bool) {
	w.mu.Lock()
	h := r.held
	w.unstored--
	if stored {
		w.stored.Add(1)
	}
	ack, nak := false, false
	if _, live := w.msgs[h]; h != nil && live {
		h.left--
		switch {
		case !stored: // handed back now: redelivered, and runs again
			nak = true
			delete(w.msgs, h)
		case h.left == 0:
			ack = true
			delete(w.msgs, h)
		}
	}
	w.mu.Unlock()
	w.freed()
	switch {
	case ack:
		h.msg.Ack()
	case nak:
		h.msg.Nak()
	}
}

// watch heartbeats held work every ackWait/3, reports liveness, and
// polls the run's stop and done keys (the control subject is faster; the
// keys survive a restart of the server).
func (w *worker) watch(ctx context.Context, ackWait time.Duration, lost <-chan struct{}) {
	beat := max(ackWait/3, 50*time.Millisecond)
	hb := time.NewTicker(beat)
	defer hb.Stop()
	live := time.NewTicker(min(2*time.Second, workersTTL/4))
	defer live.Stop()
	told := time.Now() // the progress line's last
	soon := time.NewTimer(time.Hour)
	soon.Stop()
	armed := false // soon will report what was taken since the last report
	w.report(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-lost:
			w.cancel(errLost)
			return
		case <-hb.C:
			w.mu.Lock()
			msgs := make([]jetstream.Msg, 0, len(w.msgs))
			for h := range w.msgs {
				msgs = append(msgs, h.msg)
			}
			w.mu.Unlock()
			for _, m := range msgs {
				m.InProgress()
			}
		case <-w.took:
			if !armed {
				armed = true
				soon.Reset(50 * time.Millisecond)
			}
		case <-soon.C:
			armed = false
			w.report(ctx)
		case <-live.C:
			w.report(ctx)
			w.checkControl(ctx)
			w.checkManifest(ctx)
			w.checkRetired(ctx)
			if !w.quiet && time.Since(told) >= 10*time.Second {
				told = time.Now()
				w.mu.Lock()
				running := w.running
				w.mu.Unlock()
				w.log.Info("proctor: working", "published", w.stored.Load(), "running", running, "slots", w.slots)
			}
		}
	}
}

// report puts this worker's status in the workers bucket.
func (w *worker) report(ctx context.Context) {
	w.mu.Lock()
	s := workerStatus{ID: w.id, Running: w.running, Concurrency: w.slots, Finished: w.stored.Load(), Waiting: w.waiting, Refused: w.refused, At: time.Now().UTC()}
	for h := range w.msgs {
		s.Holding = append(s.Holding, h.seq)
	}
	w.mu.Unlock()
	if w.governor != nil {
		w.governor.RateLimits(func(provider, model string, limit, inFlight, waiting int) {
			s.Lanes = append(s.Lanes, laneStatus{provider, model, limit, inFlight, waiting})
		})
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	putJSON(rctx, w.alive, workerKey(w.id), s)
}

// leave waits briefly for results on their way, hands back the work whose
// episodes were cancelled, and says it left.
func (w *worker) leave() {
	w.flush()
	select {
	case <-w.js.PublishAsyncComplete():
	case <-time.After(5 * time.Second):
	}
	w.mu.Lock()
	msgs := make([]jetstream.Msg, 0, len(w.msgs))
	for h := range w.msgs {
		msgs = append(msgs, h.msg)
	}
	w.msgs = nil
	w.mu.Unlock()
	for _, m := range msgs {
		m.Nak() // redelivered now, not after AckWait
	}
	// Its entry says it left (the bucket's TTL removes it): a worker that
	// vanishes without saying so has its work queued again at once.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	putJSON(ctx, w.alive, workerKey(w.id), workerStatus{ID: w.id, Concurrency: w.slots, Finished: w.stored.Load(), Left: true, At: time.Now().UTC()})
	w.nc.FlushTimeout(2 * time.Second)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// variantsString is a manifest's variants in one line, to compare.
func variantsString(vs []manifest.Variant) string {
	if len(vs) == 0 {
		return "none"
	}
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = v.Name + "@" + strconv.Quote(v.Harness)
	}
	return strings.Join(s, ", ")
}
