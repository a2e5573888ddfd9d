package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// deleteRun deletes run n's streams, buckets and object store; those
// already gone are no error.
func deleteRun(ctx context.Context, js jetstream.JetStream, n names) error {
	var errs []error
	gone := func(err error) bool {
		return err == nil || errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound)
	}
	for _, err := range []error{
		js.DeleteStream(ctx, n.work), js.DeleteStream(ctx, n.results),
		js.DeleteKeyValue(ctx, n.kv), js.DeleteKeyValue(ctx, n.workers), js.DeleteObjectStore(ctx, n.blobs),
		js.DeleteKeyValue(ctx, n.rates), js.DeleteStream(ctx, n.calls),
	} {
		if !gone(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// GCRun is a run that GC found on a server.
type GCRun struct {
	ID      string    // the sanitized run ID, as its stream names hold it
	Done    bool      // its coordinator marked it complete
	LastUse time.Time // the latest write to its work or results stream, or its keys
	Live    bool      // a worker reports (its liveness) or holds work: never idle
	Removed bool
}

// GC removes from the server at nc the streams, buckets and object
// stores of the runs that are complete, or that nothing wrote to for
// idle and no worker serves (abandoned; 0: never counts a run abandoned),
// and returns every run it found. With dryRun it removes nothing. A
// connection whose credentials grant the coordinator's inbox only is
// made with nats.CustomInboxPrefix("_PROCTOR_COORDINATOR").
func GC(ctx context.Context, nc *nats.Conn, idle time.Duration, dryRun bool) ([]GCRun, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	var out []GCRun
	lister := js.ListStreams(ctx)
	var ids []string
	for info := range lister.Info() {
		if id, ok := strings.CutPrefix(info.Config.Name, "WORK_"); ok {
			ids = append(ids, id)
		}
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("cluster: listing streams: %w", err)
	}
	for _, id := range ids {
		n := namesFor(id)
		r := GCRun{ID: id}
		if kv, err := js.KeyValue(ctx, n.kv); err == nil {
			if _, err := kv.Get(ctx, keyDone); err == nil {
				r.Done = true
			}
		}
		for _, name := range []string{n.work, n.results, "KV_" + n.kv} {
			if s, err := js.Stream(ctx, name); err == nil {
				if t := s.CachedInfo().State.LastTime; t.After(r.LastUse) {
					r.LastUse = t
				}
				if t := s.CachedInfo().Created; t.After(r.LastUse) {
					r.LastUse = t
				}
			}
		}
		// Episodes longer than idle write nothing while they run, but
		// their workers put their liveness, and hold their work.
		if s, err := js.Stream(ctx, "KV_"+n.workers); err == nil && s.CachedInfo().State.Msgs > 0 {
			r.Live = true
		}
		if c, err := js.Consumer(ctx, n.work, workConsumer); err == nil && c.CachedInfo().NumAckPending > 0 {
			r.Live = true
		}
		if !dryRun && r.abandonedOrDone(idle) {
			if err := deleteRun(ctx, js, n); err != nil {
				return out, fmt.Errorf("cluster: removing run %s: %w", id, err)
			}
			r.Removed = true
		}
		out = append(out, r)
	}
	return out, nil
}

// abandonedOrDone says gc removes r: done, or idle for longer than idle
// with no worker serving it.
func (r GCRun) abandonedOrDone(idle time.Duration) bool {
	return r.Done || idle > 0 && !r.Live && time.Since(r.LastUse) > idle
}
