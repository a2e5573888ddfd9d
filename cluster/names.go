package cluster

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// names are the JetStream names of one run. Subject tokens and stream
// names allow [A-Za-z0-9_-] here: anything else in a run ID becomes '_',
// and sample IDs travel base64url-encoded (RawURLEncoding's alphabet is
// exactly that set), so that any ID a dataset allows is a subject token.
type names struct {
	id        string // the sanitized run ID
	work      string // stream WORK_<id>
	results   string // stream RESULTS_<id>
	kv        string // bucket PROCTOR_<id>: manifest, stop, done
	workers   string // bucket PROCTOR_<id>_WORKERS: liveness, with a TTL
	blobs     string // object store PROCTOR_<id>_BLOBS: payloads over maxInline
	rates     string // bucket PROCTOR_<id>_RATES: the gateway's shared rate limits, with a TTL
	calls     string // stream CALLS_<id>: the gateway's call stores, shared (callstore.go)
	control   string // subject proctor.<id>.control
	workSubj  string // proctor.<id>.work
	resSubj   string // proctor.<id>.result: batches, one subject per worker
	callsSubj string // proctor.<id>.calls: an episode's stored calls, one subject per episode
}

// workConsumer is the durable consumer of the work queue that every
// worker fetches from.
const workConsumer = "workers"

func namesFor(runID string) names {
	id := sanitize(runID)
	return names{
		id: id, work: "WORK_" + id, results: "RESULTS_" + id,
		kv: "PROCTOR_" + id, workers: "PROCTOR_" + id + "_WORKERS", blobs: "PROCTOR_" + id + "_BLOBS",
		rates: "PROCTOR_" + id + "_RATES", calls: "CALLS_" + id, callsSubj: "proctor." + id + ".calls",
		control: "proctor." + id + ".control", workSubj: "proctor." + id + ".work", resSubj: "proctor." + id + ".result",
	}
}

// sanitize maps s to [A-Za-z0-9_-]+.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}

func sampleKey(sampleID string) string { return base64.RawURLEncoding.EncodeToString([]byte(sampleID)) }

// workSubject is where a sample's assignment is queued.
func (n names) workSubject(sampleID string) string { return n.workSubj + "." + sampleKey(sampleID) }

// resultsSubject is where a worker publishes its batches of results:
// the stream keeps every one, in one total order (see commitBatch).
func (n names) resultsSubject(workerID string) string { return n.resSubj + "." + workerKey(workerID) }

// parseWorkSubject returns the sample a work subject names.
func (n names) parseWorkSubject(subj string) (string, error) {
	skey, ok := strings.CutPrefix(subj, n.workSubj+".")
	if !ok {
		return "", fmt.Errorf("cluster: %q is not a work subject of run %s", subj, n.id)
	}
	id, err := base64.RawURLEncoding.DecodeString(skey)
	if err != nil {
		return "", fmt.Errorf("cluster: work subject %q: %w", subj, err)
	}
	return string(id), nil
}

// workerKey names a worker in the workers bucket: <host>-<pid>, in the
// characters KV keys allow.
func workerKey(workerID string) string {
	b := []byte(workerID)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	return string(b)
}
