package cluster

// The model gateway's call store, shared by a run's workers: each worker
// keeps its gateway's store in a file of its own and puts every call it
// stores in the run's calls stream (CALLS_<id>, one subject per episode),
// so that an episode whose worker died, or was preempted, resumes by
// replay on the worker that runs it next: that worker's gateway loads the
// episode's calls from the stream when the episode opens (package
// gateway's ShareStore).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/gateway"
	"github.com/proctor-evals/proctor/sink/jsonl"
)

// callStoreSharer is the optional interface of a Config.Models that keeps
// a call store and can share it (package gateway's *Gateway).
type callStoreSharer interface {
	OpenStore(path string) (torn *jsonl.TornTailError, flush, closeStore func() error, err error)
	ShareStore(gateway.StoreShare) error
}

// callsSubject is where episode k's stored calls go: a variant's episodes
// have a token more, so they meet no other's.
func (n names) callsSubject(k gateway.CallKey) string {
	subj := n.callsSubj + "."
	if k.Variant != "" {
		subj += sampleKey(k.Variant) + "."
	}
	return subj + sampleKey(k.Sample) + "." + strconv.Itoa(k.Epoch)
}

// shareCallStore opens a call store for cfg's gateway in a directory of
// this worker's and shares it through the run's calls stream. It returns
// what closes it once the worker's episodes ended; the gateway keeps no
// store (and episodes start over) when the run has no calls stream (a
// coordinator of an earlier release) or the gateway has a store already.
func (w *worker) shareCallStore(ctx context.Context, cfg eval.Config) (closeStore func()) {
	closeStore = func() {}
	g, ok := cfg.Models.(callStoreSharer)
	if !ok {
		return closeStore
	}
	stream, err := w.js.Stream(ctx, w.n.calls)
	if err != nil {
		w.log.Warn("the run has no shared call store: an episode of a worker that dies starts over", "err", err)
		return closeStore
	}
	dir, err := os.MkdirTemp("", "proctor-calls-")
	if err != nil {
		w.log.Warn("no call store", "err", err)
		return closeStore
	}
	_, _, closeLocal, err := g.OpenStore(filepath.Join(dir, "worker.calls.jsonl"))
	if err != nil {
		os.RemoveAll(dir)
		w.log.Warn("no call store", "err", err)
		return closeStore
	}
	max := w.nc.MaxPayload()
	err = g.ShareStore(gateway.StoreShare{
		Put: func(k gateway.CallKey, line []byte) error {
			if int64(len(line)) > max-1024 {
				return nil // over the server's message size: that call is bought again on resume
			}
			_, err := w.js.Publish(w.ctx, w.n.callsSubject(k), line)
			return err
		},
		Load: func(k gateway.CallKey) ([][]byte, error) {
			subj := w.n.callsSubject(k)
			var lines [][]byte
			for seq := uint64(1); ; {
				m, err := stream.GetMsg(w.ctx, seq, jetstream.WithGetMsgSubject(subj))
				if errors.Is(err, jetstream.ErrMsgNotFound) {
					return lines, nil
				}
				if err != nil {
					return nil, fmt.Errorf("cluster: the run's calls of %v: %w", k, err)
				}
				lines = append(lines, m.Data)
				seq = m.Sequence + 1
			}
		},
	})
	if err != nil {
		closeLocal()
		os.RemoveAll(dir)
		w.log.Warn("no shared call store", "err", err)
		return closeStore
	}
	return func() {
		if err := closeLocal(); err != nil {
			w.log.Warn("the call store", "err", err)
		}
		os.RemoveAll(dir)
	}
}
