package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/eval/report"
	"github.com/proctor-evals/proctor/internal/distrib"
	"github.com/proctor-evals/proctor/internal/sidecar"
	"github.com/proctor-evals/proctor/sink"
)

// CoordinatorOptions tune a coordinator. The zero value is valid: an
// embedded server on 127.0.0.1:4222 with a generated token.
type CoordinatorOptions struct {
	// Listen is the host:port the embedded server listens on; default
	// 127.0.0.1:4222 (port 0 picks a free one). Workers on other machines
	// need an address they can reach, e.g. 0.0.0.0:4222.
	Listen string
	// Token is, with the embedded server, what workers present; default
	// the one in the token file beside the log (runs/x.jsonl →
	// runs/x.token, mode 0600), made at the run's first start, so that a
	// coordinator started again admits the same workers. With NATS, the
	// coordinator presents it to that server (when set). It is never
	// printed: workers take it from $PROCTOR_TOKEN.
	Token string
	// NATS is the URL of an external NATS server with JetStream; when set,
	// no server is embedded and Listen, StoreDir, SyncEvery and MaxStore
	// must be unset (the coordinator's credentials and TLS go in Token
	// or NATSOptions).
	NATS        string
	NATSOptions []nats.Option
	// WorkerCredsFile and TLSCAFile are paths the printed work command
	// carries (JoinArgs): the workers' NATS credentials file and the CA
	// that verifies the server's certificate.
	WorkerCredsFile, TLSCAFile string
	// StoreDir is where the embedded server stores its streams; default
	// beside the log (runs/x.jsonl → runs/x.nats).
	StoreDir string
	// SyncEvery, when positive, makes the embedded server fsync its
	// streams at this interval (a group commit) instead of every write
	// (sync_always, the default). The log stays the truth either way: a
	// power cut may lose the last interval's results and queued work,
	// which reconciliation runs again. Results travel in batches (one
	// write for the results that finish during the previous one), so
	// every write synced costs a run little: docs/distributed.md has the
	// figures.
	SyncEvery time.Duration
	// MaxStore, when positive, bounds the embedded server's store, in
	// bytes; default what the disk holds. A full store pauses the run
	// (see Wait).
	MaxStore int64
	// Replicas is how many copies JetStream keeps of the run's streams,
	// buckets and object store; default the cluster's size up to 3 (1 on
	// a single server). It is set when they are made, and raised, never
	// lowered, on a restart: a stream an operator made R3 stays R3.
	Replicas int
	// AckWait is how long a worker may hold work without a heartbeat
	// before it is given to another; default 30 s. Workers heartbeat every
	// AckWait/3.
	AckWait time.Duration
	// ReconcileEvery is how often the coordinator queues again the
	// episodes that are neither logged, nor resulted, nor queued; default
	// 10 s.
	ReconcileEvery time.Duration
	// Linger bounds how long a finished or stopped coordinator waits for
	// its workers to see it and leave before its embedded server stops;
	// default 5 s.
	Linger time.Duration
	// Keep keeps a completed run's streams, buckets and object store (and
	// the embedded server's store) for inspection; by default they are
	// removed once the run is complete: the log is the truth. A stopped
	// run keeps them, for its resume.
	Keep bool
	// Logger receives warnings; default slog.Default().
	Logger *slog.Logger
}

// check refuses options that do not apply together: an external server's
// store, sync and address are its own.
func (o *CoordinatorOptions) check() error {
	if o.NATS == "" {
		if o.Replicas > 1 {
			return fmt.Errorf("cluster: -replicas %d (Replicas) needs a JetStream cluster of at least %[1]d servers, and the embedded server is one: pass the cluster's URLs with -nats", o.Replicas)
		}
		return nil
	}
	var set []string
	if o.Listen != "" {
		set = append(set, "-listen (Listen)")
	}
	if o.StoreDir != "" {
		set = append(set, "-store (StoreDir)")
	}
	if o.SyncEvery != 0 {
		set = append(set, "-sync-every (SyncEvery: the server's sync_interval)")
	}
	if o.MaxStore != 0 {
		set = append(set, "-max-store (MaxStore: the server's max_file_store)")
	}
	if len(set) > 0 {
		return fmt.Errorf("cluster: %s apply to the embedded server only, not with -nats (NATS)", strings.Join(set, ", "))
	}
	return nil
}

func (o *CoordinatorOptions) withDefaults() CoordinatorOptions {
	var c CoordinatorOptions
	if o != nil {
		c = *o
	}
	if c.Listen == "" && c.NATS == "" {
		c.Listen = "127.0.0.1:4222"
	}
	if c.AckWait <= 0 {
		c.AckWait = 30 * time.Second
	}
	if c.ReconcileEvery <= 0 {
		c.ReconcileEvery = 10 * time.Second
	}
	if c.Linger <= 0 {
		c.Linger = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Coordinator serves one run to its workers. Start one with
// [StartCoordinator]; Wait returns its report.
type Coordinator struct {
	rec             distrib.Recording
	cfg             eval.Config
	opts            CoordinatorOptions
	n               names
	srv             *embedded // nil with an external server
	url             string
	nc              *nats.Conn
	js              jetstream.JetStream
	work            jetstream.Stream
	res             jetstream.Stream
	madeToken       bool               // the token file is this coordinator's: removed with the run
	workersManifest *manifest.Manifest // what workers check theirs against
	kv              jetstream.KeyValue
	tagKey          []byte             // signs each episode's work (trust.go)
	tags            *tagger            // under tagKey
	alive           jetstream.KeyValue // the workers bucket
	blobs           jetstream.ObjectStore
	// handleMu orders the handling of results: a consumer replaced
	// (restartResults) hands nothing more over once consumer moved on.
	handleMu sync.Mutex
	consumer uint64                   // the generation of the results consumer whose results count
	cons     jetstream.ConsumeContext // the current results consumer, under handleMu

	seen    atomic.Uint64 // the last result stream sequence handled
	lostAt  atomic.Int64  // when the connection to the server was lost (Unix ns), 0 while connected
	commits atomic.Int64  // Commit calls made
	lastErr atomic.Pointer[string]
	fatal   chan error    // cap 1: results can no longer be recorded
	kick    chan struct{} // cap 1: reconcile now
	handled chan struct{} // cap 1: a result was handled (seen moved); reconcile waits on it

	mu     sync.Mutex // held by each Commit; closed makes later ones return
	closed bool
}

// Coordinate runs the coordinator of e's run with cfg (cfg.Log is
// required: the log is the run's truth, and a coordinator started again
// on it resumes) until every episode has its record, a stop (cfg's budget
// or error rate) or ctx is done, and returns the run's report. As
// eval.Run, it returns an error only when the run could not finish: the
// budget alone returns the report with BudgetExhausted set.
func Coordinate[T, O any](ctx context.Context, e *eval.Eval[T, O], cfg eval.Config, opts *CoordinatorOptions) (*report.Report, error) {
	c, err := StartCoordinator(ctx, e, cfg, opts)
	if err != nil {
		return nil, err
	}
	return c.Wait(ctx)
}

// StartCoordinator opens the run's log (resuming it), starts or joins the
// NATS server, sets up the run's streams and buckets (reusing those a
// previous coordinator of the run left) and queues the pending episodes.
func StartCoordinator[T, O any](ctx context.Context, e *eval.Eval[T, O], cfg eval.Config, opts *CoordinatorOptions) (*Coordinator, error) {
	o := opts.withDefaults()
	if cfg.Log == "" {
		return nil, errors.New("cluster: the coordinator needs a log (Config.Log): it is the run's truth")
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	// A coordinator that fails to start leaves nothing behind: what Open
	// and the server made is removed, what was there is not.
	fresh := absent(cfg.Log, sidecar.Lock(cfg.Log), manifest.Path(cfg.Log), transcriptPath(cfg.Log), tokenFile(cfg.Log), storeDir(cfg.Log))
	rec, err := distrib.Open(e, ctx, cfg)
	if err != nil {
		removeAll(fresh)
		return nil, err
	}
	c := &Coordinator{rec: rec, cfg: cfg, opts: o, n: namesFor(rec.RunID()), fatal: make(chan error, 1), kick: make(chan struct{}, 1), handled: make(chan struct{}, 1)}
	// Workers check their eval against the manifest of the whole dataset:
	// a narrowed run (-smoke, -from) is the coordinator's choice, which
	// they run from their whole dataset.
	c.workersManifest = rec.Manifest()
	if cfg.Subset.PerValue > 0 || cfg.Select != nil {
		whole := cfg
		whole.Subset, whole.Select, whole.RunID = eval.Subset{}, nil, rec.RunID()
		if c.workersManifest, err = e.Manifest(ctx, whole); err != nil {
			rec.Close(context.WithoutCancel(ctx))
			removeAll(fresh)
			return nil, err
		}
	}
	if err := c.connect(ctx); err != nil {
		c.shutdown()
		rec.Close(context.WithoutCancel(ctx))
		removeAll(fresh)
		return nil, err
	}
	// The progress line and Progress count what the live workers hold.
	rec.SetRunning(func() (int, []distrib.RunningEpisode) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return c.runningEpisodes(ctx), nil
	})
	return c, nil
}

func (c *Coordinator) connect(ctx context.Context) error {
	o := c.opts
	copts := []nats.Option{nats.Name("proctor coordinator " + c.n.id), nats.CustomInboxPrefix(coordinatorInbox),
		nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err == nil {
				return // closed by us
			}
			c.lostAt.Store(time.Now().UnixNano())
			c.opts.Logger.Warn("proctor: lost the NATS server; waiting for it (the run waits too)", "since", time.Now().Format(time.TimeOnly), "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			lost := time.Unix(0, c.lostAt.Swap(0))
			c.opts.Logger.Info("proctor: the NATS server is back", "server", nc.ConnectedServerName(), "after", time.Since(lost).Round(time.Millisecond))
		})}
	if o.NATS == "" {
		dir := o.StoreDir
		if dir == "" {
			dir = storeDir(c.cfg.Log)
		}
		token, made, err := workersToken(o.Token, tokenFile(c.cfg.Log))
		if err != nil {
			return err
		}
		c.madeToken = made
		srv, err := startServer(o.Listen, dir, token, c.n, o.SyncEvery, o.MaxStore)
		if err != nil {
			return err
		}
		c.srv, c.url = srv, srv.url
		copts = append(copts, nats.InProcessServer(srv.srv), nats.Token(srv.coordSecret))
		nc, err := nats.Connect("", copts...)
		if err != nil {
			return fmt.Errorf("cluster: connecting to the embedded server: %w", err)
		}
		c.nc = nc
	} else {
		c.url = o.NATS
		if o.Token != "" {
			copts = append(copts, nats.Token(o.Token))
		}
		nc, err := dial(o.NATS, append(copts, o.NATSOptions...)...)
		if err != nil {
			return err
		}
		c.nc = nc
	}
	js, err := jetstream.New(c.nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	c.js = js
	if err := c.setup(ctx); err != nil {
		return err
	}
	if err := c.reconcile(ctx); err != nil {
		c.opts.Logger.Warn("proctor: queueing work (retried every ReconcileEvery)", "err", err)
	}
	go c.reconcileLoop(ctx)
	return nil
}

// setup creates the run's streams, consumer and buckets, or reuses them.
func (c *Coordinator) setup(ctx context.Context) error {
	runs, err := c.createStores(ctx)
	if err != nil {
		return err
	}
	if err := c.clearEnd(ctx); err != nil {
		return err
	}
	if err := c.publishRun(ctx, runs); err != nil {
		return err
	}
	return c.consumeResults(ctx)
}

// createStores makes the run's streams, buckets and object store, and
// returns the bucket naming the current run.
func (c *Coordinator) createStores(ctx context.Context) (runs jetstream.KeyValue, err error) {
	n := c.n
	want := c.opts.Replicas
	if want <= 0 {
		want = clusterReplicas(c.nc)
	}
	// replicas is want, or more when the stream has more already.
	replicas := func(stream string) int {
		if s, err := c.js.Stream(ctx, stream); err == nil {
			return max(want, s.CachedInfo().Config.Replicas)
		}
		return want
	}
	// The work queue is derived state (reconcile rebuilds it from the log),
	// so on one server its writes and acknowledgements are flushed
	// asynchronously: an fsync per acknowledgement would bound a run to a
	// thousand samples a second. A replicated queue is written through
	// its Raft log, which batches them, and may not be asynchronous.
	workReplicas := replicas(n.work)
	persist := jetstream.DefaultPersistMode
	if workReplicas == 1 {
		persist = jetstream.AsyncPersistMode
	}
	// The streams, buckets and store are made at once (each a synced write
	// or more): a run starts sooner.
	var g errgroup.Group
	create := func(what string, f func() error) {
		g.Go(func() error {
			if err := f(); err != nil {
				return fmt.Errorf("cluster: creating %s: %w", what, err)
			}
			return nil
		})
	}
	create("stream "+n.work, func() (err error) {
		c.work, err = c.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name: n.work, Subjects: []string{n.workSubj + ".>"}, Storage: jetstream.FileStorage, Replicas: workReplicas, PersistMode: persist,
			Retention: jetstream.WorkQueuePolicy, MaxMsgsPerSubject: 1, Discard: jetstream.DiscardNew, DiscardNewPerSubject: true,
		})
		if err != nil {
			return err
		}
		_, err = c.work.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
			Durable: workConsumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: c.opts.AckWait,
			MaxDeliver: -1, MaxAckPending: -1,
		})
		return err
	})
	// Results are batches, kept as every write is (synced, with
	// SyncAlways): one message, and one fsync, for many episodes. The
	// stream keeps every batch, duplicates included; the first result of
	// an episode in stream order is the one logged (commitBatch).
	create("stream "+n.results, func() (err error) {
		c.res, err = c.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name: n.results, Subjects: []string{n.resSubj + ".>"}, Storage: jetstream.FileStorage, Replicas: replicas(n.results),
			Retention: jetstream.LimitsPolicy,
		})
		return err
	})
	create("bucket "+n.kv, func() (err error) {
		c.kv, err = c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: n.kv, Storage: jetstream.FileStorage, Replicas: replicas("KV_" + n.kv)})
		return err
	})
	create("bucket "+n.workers, func() (err error) {
		c.alive, err = c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: n.workers, TTL: workersTTL, Storage: jetstream.MemoryStorage, Replicas: replicas("KV_" + n.workers)})
		return err
	})
	create("bucket "+n.rates, func() (err error) {
		_, err = c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: n.rates, TTL: ratesTTL, Storage: jetstream.MemoryStorage, Replicas: replicas("KV_" + n.rates)})
		return err
	})
	create("stream "+n.calls, func() (err error) {
		_, err = c.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name: n.calls, Subjects: []string{n.callsSubj + ".>"}, Storage: jetstream.FileStorage, Replicas: replicas(n.calls),
			Retention: jetstream.LimitsPolicy, AllowDirect: true,
		})
		return err
	})
	create("object store "+n.blobs, func() (err error) {
		c.blobs, err = c.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: n.blobs, Storage: jetstream.FileStorage, Replicas: replicas("OBJ_" + n.blobs)})
		return err
	})
	create("bucket "+runsBucket, func() (err error) {
		runs, err = c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: runsBucket, Storage: jetstream.FileStorage, Replicas: replicas("KV_" + runsBucket)})
		return err
	})
	if err := g.Wait(); err != nil {
		if tooFewServers(err) {
			return nil, fmt.Errorf("cluster: the server cannot keep %d replicas of the run's streams: replicas need a JetStream cluster of at least that many servers (-replicas 1 on a single server)", want)
		}
		return nil, err
	}
	return runs, nil
}

// clearEnd makes a run started again live again: the previous
// coordinator's stop or done no longer holds, and its budgets count from
// nothing, as Stats does. (A purge is a write,
// synced: only where there is something to clear.)
func (c *Coordinator) clearEnd(ctx context.Context) error {
	for _, k := range []string{keyStop, keyDone, keySpend, keyRetired} {
		if _, err := c.kv.Get(ctx, k); errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err := c.kv.Purge(ctx, k); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("cluster: clearing %s: %w", k, err)
		}
	}
	return nil
}

// publishRun stores what workers read before they take work: the tag key,
// the manifest, and this run as the current one.
func (c *Coordinator) publishRun(ctx context.Context, runs jetstream.KeyValue) (err error) {
	if c.tagKey, err = tagKey(ctx, c.kv); err != nil {
		return err
	}
	c.tags = newTagger(c.tagKey, c.rec.RunID())
	if err := putJSON(ctx, c.kv, keyManifest, c.workersManifest); err != nil {
		return fmt.Errorf("cluster: storing the manifest: %w", err)
	}
	if _, err := runs.Put(ctx, currentKey, []byte(c.rec.RunID())); err != nil {
		return fmt.Errorf("cluster: naming the current run: %w", err)
	}
	return nil
}

// consumeResults starts committing every result from the first: on a
// restart, those the log lacks are committed again (what the log holds is
// skipped). An ordered consumer needs no acks (they would prove nothing)
// and survives a server restart by resuming after the last sequence it
// handled.
func (c *Coordinator) consumeResults(ctx context.Context) error {
	cc, err := c.consumeFrom(ctx, 0, 1)
	if err != nil {
		return fmt.Errorf("cluster: creating the results consumer: %w", err)
	}
	c.cons = cc
	return nil
}

// consumeFrom reads the results stream from sequence from on, as consumer
// generation gen.
func (c *Coordinator) consumeFrom(ctx context.Context, gen, from uint64) (jetstream.ConsumeContext, error) {
	cons, err := c.js.OrderedConsumer(ctx, c.n.results, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from,
		// Bounded: a consumer that cannot be made again is replaced by
		// restartResults, not retried for ever.
		MaxResetAttempts: 3,
	})
	if err != nil {
		return nil, err
	}
	// The consumer is made again from where it was when a server or the
	// stream's leader goes (a missed heartbeat): 2 s heartbeats, not the
	// default 5, let a run go on within seconds of a failover.
	return cons.Consume(func(msg jetstream.Msg) { c.handleResult(gen, msg) }, jetstream.PullHeartbeat(2*time.Second),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if !errors.Is(err, jetstream.ErrConnectionClosed) { // closed at the run's end
				c.opts.Logger.Info("proctor: reading results", "read_to_seq", c.seen.Load(), "err", err)
			}
		}))
}

// restartResults replaces a results consumer that has read nothing for a
// while with results waiting. After a server's death the client makes its
// consumer again under the next name, and that request may go unanswered
// attempt after attempt (seen with nats-server 2.15.2 when the stream's
// leader was SIGKILLed: a name placed on the dead node, we believe), and
// the run would wait for ever. The new one, under new names, reads on from
// the last result handled; the old one's later deliveries are ignored.
func (c *Coordinator) restartResults(ctx context.Context) {
	c.handleMu.Lock()
	c.consumer++
	gen, from, old := c.consumer, c.seen.Load()+1, c.cons
	c.cons = nil
	c.handleMu.Unlock()
	if old != nil {
		old.Stop()
	}
	go func() {
		// Made within the wait before the next replacement, or given up.
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resultsStuckAfter*4/5)
		defer cancel()
		cc, err := c.consumeFrom(mctx, gen, from)
		if err != nil {
			c.opts.Logger.Warn("proctor: reading results with another consumer", "from_seq", from, "err", err)
			return // the next round of reconcile tries again
		}
		c.handleMu.Lock()
		defer c.handleMu.Unlock()
		if gen != c.consumer || c.isClosed() {
			cc.Stop() // replaced again meanwhile, or the run closed
			return
		}
		c.cons = cc
	}()
}

func (c *Coordinator) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// tooFewServers reports a stream refused for its replicas: a single
// server, or a cluster smaller than the count.
func tooFewServers(err error) bool {
	var apiErr *jetstream.APIError
	const replicasNotSupported, noPeers = 10074, 10005 // nats-server's JSStreamReplicasNotSupportedErr, JSClusterNoPeersErrF
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == replicasNotSupported || apiErr.ErrorCode == noPeers)
}

// clusterReplicas is the default replica count: the size of the cluster
// nc is connected to (the servers it knows), up to 3; 1 on a single
// server.
func clusterReplicas(nc *nats.Conn) int {
	if nc.ConnectedClusterName() == "" {
		return 1
	}
	return min(max(len(nc.Servers()), 1), 3)
}

// tagKey returns the run's tag key, made by its first coordinator: a
// coordinator started again accepts the results of the work queued
// before.
func tagKey(ctx context.Context, kv jetstream.KeyValue) ([]byte, error) {
	for {
		e, err := kv.Get(ctx, keyTagKey)
		if err == nil {
			return e.Value(), nil
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, fmt.Errorf("cluster: reading the run's tag key: %w", err)
		}
		if _, err := kv.Create(ctx, keyTagKey, newTagKey()); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("cluster: storing the run's tag key: %w", err)
		}
	}
}

// resultsStuckAfter is how long the results consumer may read nothing,
// with results waiting in the stream, before it is replaced.
const resultsStuckAfter = 10 * time.Second

// handleResult commits one results message, in stream order, unless its
// consumer (generation gen) was replaced.
func (c *Coordinator) handleResult(gen uint64, msg jetstream.Msg) {
	c.handleMu.Lock()
	defer c.handleMu.Unlock()
	if gen != c.consumer {
		return // a consumer replaced: its successor reads on from seen
	}
	md, err := msg.Metadata()
	if err != nil {
		c.opts.Logger.Warn("proctor: result without metadata", "subject", msg.Subject(), "err", err)
		return
	}
	c.commitBatch(md.Sequence.Stream, msg.Data())
	c.seen.Store(md.Sequence.Stream)
	select {
	case c.handled <- struct{}{}:
	default:
	}
}

// commitBatch commits the results of a batch (stream sequence seq) that
// the log lacks, in order. The first result of an episode in the stream's
// order (a total order: sequence, then place in the batch) is the one
// logged, whoever sent it and whenever the coordinator reads it: a result
// of an episode run twice (redelivered, or queued again) that comes later
// is dropped, on a first reading as on a restart's.
func (c *Coordinator) commitBatch(seq uint64, data []byte) {
	entries, err := decodeBatch(data)
	if err != nil {
		c.drop(seq, err)
		return
	}
	for i := range entries {
		c.commitEntry(seq, &entries[i])
	}
}

func (c *Coordinator) commitEntry(seq uint64, e *entry) {
	sampleID, epoch := e.SampleID, e.Epoch
	if c.rec.Has(sampleID, epoch) {
		return // logged already (a restart replays every result; a later duplicate), or not of this run
	}
	if !c.tags.valid(sampleID, epoch, e.Tag) {
		c.drop(seq, fmt.Errorf("cluster: a result for sample %q epoch %d without the tag of its work: not from a worker given it", sampleID, epoch))
		return
	}
	body := e.Body
	if e.Blob != "" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		b, err := c.blobs.GetBytes(ctx, e.Blob)
		cancel()
		if err != nil {
			c.drop(seq, fmt.Errorf("cluster: the result of sample %q epoch %d is in object %q: %w", sampleID, epoch, e.Blob, err))
			return
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != e.Digest {
			c.drop(seq, fmt.Errorf("cluster: the result of sample %q epoch %d: object %q is not what its worker stored", sampleID, epoch, e.Blob))
			return
		}
		body = b
	}
	f, err := decodeResult(body, sampleID, epoch, c.rec.Slot)
	if err == nil {
		err = checkRecord(&f.Record, c.rec.Manifest().Eval)
	}
	if err == nil {
		err = c.rec.CheckInput(sampleID, f.Record.Input)
	}
	if err != nil {
		c.drop(seq, err)
		return
	}
	if f.Record.Status == sink.Error {
		msg := f.Record.Error
		c.lastErr.Store(&msg)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.rec.Has(sampleID, epoch) {
		return
	}
	c.commits.Add(1)
	if err := c.rec.Commit(f); err != nil {
		select {
		case c.fatal <- err:
		default:
		}
	}
}

// drop says why a result cannot be committed. Its episode stays pending:
// reconcile queues it again (its work was acknowledged), and it runs
// again. The batch stays in the stream for the other results it holds.
func (c *Coordinator) drop(seq uint64, why error) {
	c.opts.Logger.Warn("proctor: dropping a result that cannot be recorded; the episode runs again", "seq", seq, "err", why)
}

func (c *Coordinator) reconcileLoop(ctx context.Context) {
	t := time.NewTicker(c.opts.ReconcileEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.rec.Complete():
			return
		case <-t.C:
		case <-c.kick:
		}
		if c.isClosed() {
			return
		}
		if err := c.reconcile(ctx); err != nil && ctx.Err() == nil {
			c.opts.Logger.Warn("proctor: reconciling", "err", err)
		}
	}
}

// reconcile queues every pending episode that has neither a result nor a
// queued work message. The order of its reads matters: the work queue
// first, then the results stream's last sequence, because a worker
// publishes an assignment's results before it acks it; once the results
// consumer has handled everything up to that sequence, a sample whose
// message has left the queue has its results committed, or lost.
func (c *Coordinator) reconcile(ctx context.Context) error {
	// Queueing a large run's work takes a while when every write is
	// fsynced: a round is bounded generously, and one cut short is resumed
	// by the next.
	ctx, cancel := context.WithTimeout(ctx, max(c.opts.ReconcileEvery, 2*time.Minute))
	defer cancel()
	winfo, err := c.work.Info(ctx, jetstream.WithSubjectFilter(c.n.workSubj+".>"))
	if err != nil {
		return fmt.Errorf("cluster: work queue: %w", err)
	}
	queued := winfo.State.Subjects
	// Work for samples the dataset lacks (queued by a coordinator of the
	// run whose dataset had them) is purged: no worker of this eval can
	// run it.
	for subj := range queued {
		if id, err := c.n.parseWorkSubject(subj); err == nil && !c.rec.HasSample(id) {
			c.opts.Logger.Warn("proctor: removing queued work for a sample the dataset lacks", "sample", id)
			if err := c.work.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
				return fmt.Errorf("cluster: work queue: %w", err)
			}
		}
	}
	rinfo, err := c.res.Info(ctx)
	if err != nil {
		return fmt.Errorf("cluster: results stream: %w", err)
	}
	// Wait until the consumer has handled what the stream held, and the
	// recorder has written what was committed, so that results on their
	// way are not queued again (that would only cost a run, but a run).
	stuck := time.NewTimer(resultsStuckAfter)
	defer stuck.Stop()
	for c.seen.Load() < rinfo.State.LastSeq {
		select {
		case <-ctx.Done():
			return nil // behind: the next round catches up
		case <-c.handled:
			stuck.Reset(resultsStuckAfter)
		case <-stuck.C:
			c.opts.Logger.Warn("proctor: the results consumer read nothing for "+resultsStuckAfter.String()+" with results waiting; reading them with another",
				"read_to_seq", c.seen.Load(), "last_seq", rinfo.State.LastSeq)
			c.restartResults(ctx)
			stuck.Reset(resultsStuckAfter)
		}
	}
	// Results committed but not yet written look pending: give the
	// recorder a moment (a duplicate would only be dropped, and counted).
	for wait := time.Now().Add(time.Second); c.rec.Stats().Records < c.commits.Load() && time.Now().Before(wait); {
		time.Sleep(5 * time.Millisecond)
	}
	// What is pending and not queued has no result in the stream: the
	// consumer has handled every one it held, and logged what it could.
	var futures []jetstream.PubAckFuture
	for _, a := range c.rec.Pending() {
		subj := c.n.workSubject(a.SampleID)
		if queued[subj] > 0 {
			continue
		}
		m := workMsg{Assignment: a, Tags: make([]string, len(a.Epochs))}
		for i, ep := range a.Epochs {
			m.Tags[i] = c.tags.tag(a.SampleID, ep)
		}
		body, err := json.Marshal(m)
		if err != nil {
			return err
		}
		f, err := c.js.PublishMsgAsync(&nats.Msg{Subject: subj, Data: body}, jetstream.WithStallWait(30*time.Second))
		if err != nil {
			return fmt.Errorf("cluster: queueing sample %q: %w", a.SampleID, err)
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			if !isPerSubjectFull(err) {
				return fmt.Errorf("cluster: queueing work: %w", err)
			}
		case <-ctx.Done():
			return fmt.Errorf("cluster: queueing work: %w", ctx.Err())
		}
	}
	return nil
}

// StopError is a run its coordinator stopped before it was complete:
// what workers were running then runs when the coordinator starts again
// on the same log.
type StopError struct{ Reason string }

func (e *StopError) Error() string { return "cluster: run stopped: " + e.Reason }

// Wait serves the run until it is complete or stopped, closes the log and
// returns the report. On ctx done (an interrupt) it stops the run: every
// worker cancels its episodes, which run again on resume.
func (c *Coordinator) Wait(ctx context.Context) (*report.Report, error) {
	end := c.serve(ctx)
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.Linger+30*time.Second)
	defer cancel()
	complete, running := c.announce(bg, end)
	c.linger(bg)
	return c.close(bg, end, complete, running)
}

// runEnd is why serve returned.
type runEnd struct {
	stopErr error // ctx's cause, the error rate's stop, or a log that cannot be written
	budget  bool  // Config.MaxCostUSD or MaxTokens is spent
	decided bool  // a sequential gate decided
}

// serve watches the run until it is complete, decided or stopped: its
// budget, error rate and workers (what holds it up, work to requeue).
func (c *Coordinator) serve(ctx context.Context) runEnd {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	held := time.NewTicker(2 * time.Second)
	defer held.Stop()
	var refused refusedResults
	var lost lostWorkers
	watching, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	spent := c.watchSpend(watching)
	told := 0 // variants retired that the workers were told of
	for {
		select {
		case <-spent:
			return runEnd{budget: true}
		case <-held.C:
			if ws, err := c.workers(ctx); err == nil {
				refused.check(c, ws)
				lost.check(ctx, c, ws)
			}
		case <-c.rec.Complete():
			return runEnd{}
		case <-c.rec.Decided():
			return runEnd{decided: true}
		case <-ctx.Done():
			return runEnd{stopErr: context.Cause(ctx)}
		case err := <-c.fatal:
			return runEnd{stopErr: err}
		case <-tick.C:
			if retired := c.rec.Retired(); len(retired) > told && c.tellRetired(ctx, retired) {
				told = len(retired)
			}
			st := c.rec.Stats()
			if c.cfg.MaxCostUSD > 0 && st.CostUSD >= c.cfg.MaxCostUSD || c.cfg.MaxTokens > 0 && st.Tokens >= c.cfg.MaxTokens {
				return runEnd{budget: true}
			}
			last := ""
			if p := c.lastErr.Load(); p != nil {
				last = *p
			}
			if err := c.cfg.ErrorRateStop(st.Errors, st.Records, last); err != nil {
				return runEnd{stopErr: err}
			}
		}
	}
}

// tellRetired tells the workers which variants are retired (their gate
// decided, or eliminated), in the retired key (which a worker joining
// later reads) and on the control subject (at once): they skip those
// variants' episodes in the work they take from now on. It reports
// whether the key was written.
func (c *Coordinator) tellRetired(ctx context.Context, variants []string) bool {
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := putJSON(wctx, c.kv, keyRetired, retiredNotice{Variants: variants}); err != nil {
		c.opts.Logger.Warn("proctor: telling workers which variants decided", "err", err)
		return false
	}
	c.publishControl(controlMsg{Op: "retired"})
	return true
}

// announce tells the workers the run is done or stopped, and returns
// whether it is complete and how many episodes were running.
func (c *Coordinator) announce(ctx context.Context, end runEnd) (complete bool, running int) {
	select {
	case <-c.rec.Complete():
		complete = end.stopErr == nil && !end.budget
	default:
	}
	if end.decided && !complete && end.stopErr == nil {
		// Episodes in flight on workers end as cancelled: the decision,
		// taken on the claim order's finished prefix, does not need them.
		running = c.runningEpisodes(ctx)
		complete = true
	}
	if complete {
		if err := putJSON(ctx, c.kv, keyDone, stopNotice{Reason: "complete", At: time.Now().UTC()}); err != nil {
			c.opts.Logger.Warn("proctor: telling workers the run is done", "err", err)
		}
		c.publishControl(controlMsg{Op: "done"})
		return complete, running
	}
	reason := "the budget (Config.MaxCostUSD or MaxTokens) is spent"
	if end.stopErr != nil {
		reason = end.stopErr.Error()
	}
	running = c.runningEpisodes(ctx)
	if err := putJSON(ctx, c.kv, keyStop, stopNotice{Reason: reason, At: time.Now().UTC()}); err != nil {
		c.opts.Logger.Warn("proctor: telling workers to stop", "err", err)
	}
	c.publishControl(controlMsg{Op: "stop", Reason: reason})
	return complete, running
}

// close stops committing, closes the log and returns its report; a
// complete run's streams (and embedded store) are removed unless Keep.
func (c *Coordinator) close(ctx context.Context, end runEnd, complete bool, running int) (*report.Report, error) {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.handleMu.Lock()
	if c.cons != nil {
		c.cons.Stop()
	}
	c.handleMu.Unlock()
	if !complete || end.decided {
		c.rec.SetStopped(running, end.budget)
	}
	rep, err := c.rec.Close(ctx)
	remove := complete && err == nil && !c.opts.Keep
	if remove {
		c.removeRun(ctx)
	}
	c.shutdown()
	if remove && c.srv != nil {
		c.removeEmbedded()
	}
	return rep, errors.Join(end.stopErr, err)
}

// removeRun deletes a completed run's streams, buckets and object store,
// and its name as the server's latest run.
func (c *Coordinator) removeRun(ctx context.Context) {
	if err := deleteRun(ctx, c.js, c.n); err != nil {
		c.opts.Logger.Warn("proctor: removing the run's streams (gc removes them later)", "err", err)
	}
	if runs, err := c.js.KeyValue(ctx, runsBucket); err == nil {
		if e, err := runs.Get(ctx, currentKey); err == nil && string(e.Value()) == c.rec.RunID() {
			runs.Delete(ctx, currentKey, jetstream.LastRevision(e.Revision()))
		}
	}
}

// removeEmbedded removes, once its server has stopped, the embedded
// store when it is the default one beside the log (a -store directory is
// the operator's), and the token file.
func (c *Coordinator) removeEmbedded() {
	if c.opts.StoreDir == "" {
		if err := os.RemoveAll(storeDir(c.cfg.Log)); err != nil {
			c.opts.Logger.Warn("proctor: removing the embedded server's store", "err", err)
		}
	}
	if f := c.TokenFile(); f != "" {
		os.Remove(f)
	}
}

// absent returns those of paths that do not exist.
func absent(paths ...string) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			out = append(out, p)
		}
	}
	return out
}

func removeAll(paths []string) {
	for _, p := range paths {
		os.RemoveAll(p)
	}
}

// transcriptPath is where eval keeps the run's transcripts: x.jsonl →
// x.traces.jsonl.
func transcriptPath(log string) string { return sidecar.Transcripts(log) }

// pausedEvery is how often the coordinator says the run is paused, as
// often as the progress line comes.
const pausedEvery = 10 * time.Second

// refusedResults follows the results the server refuses to store (a full
// store): workers keep them and retry, the run waits for them, and the
// coordinator says so.
type refusedResults struct {
	since, told time.Time // zero while none are refused
}

// check reads what the workers report, and says what holds the run up:
// when it starts (within one check, 2 s, of a worker's refusal, which it
// reports at once), every 10 s while it lasts, beside the progress line
// (which shows no episode running, and an ETA as if it were not
// paused), and when it ends.
func (r *refusedResults) check(c *Coordinator, ws []WorkerProgress) {
	waiting, why := 0, ""
	for _, w := range ws {
		if w.Waiting > 0 {
			waiting += w.Waiting
			why = w.Refused
		}
	}
	now := time.Now()
	switch {
	case waiting > 0 && (r.since.IsZero() || now.Sub(r.told) >= pausedEvery):
		if r.since.IsZero() {
			r.since = now
		}
		r.told = now
		hint := "is a server or the stream down?"
		if strings.Contains(why, "insufficient resources") {
			hint = "a full store: free space or raise its limit"
		}
		c.opts.Logger.Warn("proctor: the NATS server does not store results: the run is paused, its workers keep their results and retry ("+hint+")",
			"since", r.since.Format(time.TimeOnly), "paused_for", now.Sub(r.since).Round(time.Second), "results_waiting", waiting, "err", why)
	case waiting == 0 && !r.since.IsZero():
		c.opts.Logger.Info("proctor: the NATS server stores results again; the run goes on", "paused_for", now.Sub(r.since).Round(time.Second))
		r.since = time.Time{}
	}
}

// lostWorkers follows the live workers, to requeue at once the work of
// one whose liveness entry expired (killed, paused, cut off) rather than
// after the ack wait; and the work delivered that no live worker says it
// holds (taken by a worker killed before it said so, or on its way to it
// when it died), once two checks in a row found it so: a live worker says
// what it takes within 50 ms.
type lostWorkers struct {
	last     map[string]WorkerProgress
	orphaned map[uint64]bool // at the last check
}

func (l *lostWorkers) check(ctx context.Context, c *Coordinator, ws []WorkerProgress) {
	now := make(map[string]WorkerProgress, len(ws))
	held := map[uint64]bool{}
	for _, w := range ws {
		now[w.ID] = w
		for _, seq := range w.holding {
			held[seq] = true
		}
	}
	if c.opts.AckWait <= workersTTL {
		l.last = now // redelivery after the ack wait comes first
		return
	}
	orphaned := c.unheld(ctx, held)
	n := 0
	for seq := range orphaned {
		if l.orphaned[seq] && c.work.DeleteMsg(ctx, seq) == nil {
			delete(orphaned, seq)
			n++
		}
	}
	l.orphaned = orphaned
	if n > 0 {
		c.opts.Logger.Warn("proctor: work delivered to a worker that no live worker holds (its worker died before saying it took it): queued again now", "samples", n)
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	for id, w := range l.last {
		if _, ok := now[id]; ok || w.Left || len(w.holding) == 0 {
			continue
		}
		// Its messages are deleted and queued again by reconcile; if it
		// was only paused, its results still count (first one wins).
		n := 0
		for _, seq := range w.holding {
			if err := c.work.DeleteMsg(ctx, seq); err == nil {
				n++
			}
		}
		c.opts.Logger.Warn("proctor: a worker stopped reporting (its liveness expired): its work is queued again now", "worker", id, "samples", n, "last_seen", w.Seen.Format(time.TimeOnly))
		if n > 0 {
			select {
			case c.kick <- struct{}{}:
			default:
			}
		}
	}
	l.last = now
}

// unheld returns the work messages delivered to workers and not yet
// acknowledged that are not in held: it reads the work stream from the
// consumer's acknowledgement floor to its last delivery, skipping what is
// gone (acknowledged), so that it reads about as many messages as are
// delivered and unacknowledged.
func (c *Coordinator) unheld(ctx context.Context, held map[uint64]bool) map[uint64]bool {
	cons, err := c.work.Consumer(ctx, workConsumer)
	if err != nil {
		return nil
	}
	info := cons.CachedInfo()
	if info.NumAckPending <= len(held) {
		return nil
	}
	out := map[uint64]bool{}
	for seq := info.AckFloor.Stream + 1; seq <= info.Delivered.Stream; seq++ {
		m, err := c.work.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(c.n.workSubj+".>"))
		if err != nil || m.Sequence > info.Delivered.Stream {
			break
		}
		if seq = m.Sequence; !held[seq] {
			out[seq] = true
		}
	}
	return out
}

func (c *Coordinator) publishControl(m controlMsg) {
	b, _ := json.Marshal(m)
	if err := c.nc.Publish(c.n.control, b); err == nil {
		c.nc.FlushTimeout(2 * time.Second)
	}
}

// linger waits, at most Linger, until every worker has left, so that
// they hear a done or stop from the embedded server before it goes.
func (c *Coordinator) linger(ctx context.Context) {
	deadline := time.Now().Add(c.opts.Linger)
	for time.Now().Before(deadline) {
		ws, err := c.workers(ctx)
		if err == nil && !slices.ContainsFunc(ws, func(w WorkerProgress) bool { return !w.Left }) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *Coordinator) runningEpisodes(ctx context.Context) int {
	ws, _ := c.workers(ctx)
	n := 0
	for _, w := range ws {
		n += w.Running
	}
	return n
}

// workers lists the live workers' latest status.
func (c *Coordinator) workers(ctx context.Context) ([]WorkerProgress, error) {
	lister, err := c.alive.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	var out []WorkerProgress
	for k := range lister.Keys() {
		e, err := c.alive.Get(ctx, k)
		if err != nil {
			continue // left since
		}
		var s workerStatus
		if json.Unmarshal(e.Value(), &s) != nil {
			continue
		}
		out = append(out, WorkerProgress{ID: s.ID, Running: s.Running, Concurrency: s.Concurrency, Finished: s.Finished, Waiting: s.Waiting, Refused: s.Refused,
			Seen: s.At, Left: s.Left, holding: s.Holding, lanes: s.Lanes})
	}
	slices.SortFunc(out, func(a, b WorkerProgress) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	return out, nil
}

func (c *Coordinator) shutdown() {
	if c.nc != nil {
		c.nc.Drain()
		c.nc.Close()
	}
	if c.srv != nil {
		c.srv.shutdown()
	}
}

// Progress is a distributed run's state: the episodes its log holds and
// what each live worker runs.
type Progress struct {
	Done, Total int64 // episodes with a final record, of the run's
	Records     int64 // records committed since the coordinator started
	Errors      int64 // of which ended in error
	CostUSD     float64
	Workers     []WorkerProgress
}

// WorkerProgress is a live worker, as it last reported itself.
type WorkerProgress struct {
	ID          string // host:pid
	Running     int    // episodes it holds
	Concurrency int
	Finished    int64  // episodes it published
	Waiting     int    // results the server refused, which it keeps and publishes again
	Refused     string // why the server refused the latest
	Seen        time.Time
	Left        bool // it left (its entry stays until the TTL drops it)

	holding []uint64     // the work stream sequences it holds
	lanes   []laneStatus // its gateway's rate governor
}

// Running is the episodes held by live workers.
func (p Progress) Running() int {
	n := 0
	for _, w := range p.Workers {
		n += w.Running
	}
	return n
}

// Progress returns the run's progress: counts from the committed records,
// and the live workers from their latest reports.
func (c *Coordinator) Progress(ctx context.Context) (Progress, error) {
	st := c.rec.Stats()
	p := Progress{Done: st.Done, Total: st.Total, Records: st.Records, Errors: st.Errors, CostUSD: st.CostUSD}
	ws, err := c.workers(ctx)
	p.Workers = slices.DeleteFunc(ws, func(w WorkerProgress) bool { return w.Left })
	return p, err
}

// RunID returns the run's ID.
func (c *Coordinator) RunID() string { return c.rec.RunID() }

// JoinArgs returns the arguments of the work command that joins this run:
// -join URL -run-id ID, and the paths of the workers' credentials and of
// the CA when given. It holds no secret (the URL's user and password are
// left out): workers take the token from $PROCTOR_TOKEN (see TokenFile).
func (c *Coordinator) JoinArgs() []string {
	args := []string{"work", "-join", redactURL(c.url), "-run-id", c.rec.RunID()}
	if c.opts.WorkerCredsFile != "" {
		args = append(args, "-creds", c.opts.WorkerCredsFile)
	}
	if c.opts.TLSCAFile != "" {
		args = append(args, "-tls-ca", c.opts.TLSCAFile)
	}
	return args
}

// TokenFile returns the file holding the workers' token, when the
// coordinator made it (no Token given), else "".
func (c *Coordinator) TokenFile() string {
	if c.srv == nil || c.opts.Token != "" {
		return ""
	}
	return tokenFile(c.cfg.Log)
}
