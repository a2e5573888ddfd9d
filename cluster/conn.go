package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// runsBucket names, on a server, the run its latest coordinator serves:
// a worker given no run ID joins that one.
const (
	runsBucket = "PROCTOR_RUNS"
	currentKey = "current"
)

// Keys of a run's bucket.
const (
	keyManifest = "manifest"
	keyStop     = "stop"
	keyDone     = "done"
	// keyRetired lists the variants retired: their sequential gate
	// decided, or they were eliminated (retiredNotice); workers skip
	// their episodes.
	keyRetired = "retired"
)

// retiredNotice is the value of the retired key: the variants whose
// sequential gate decided or which were eliminated, by name, in the
// eval's order.
type retiredNotice struct {
	Variants []string `json:"variants"`
}

// stopNotice is the value of the stop key and of a stop on the control
// subject: why the coordinator stopped the run.
type stopNotice struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// controlMsg is what the coordinator publishes on the control subject:
// "stop" or "done", so that workers act at once (they also poll the keys,
// which survive a restart of the server).
type controlMsg struct {
	Op     string `json:"op"`
	Reason string `json:"reason,omitempty"`
}

// workerStatus is a worker's entry in the workers bucket, put every few
// seconds; the bucket's TTL drops the entries of dead workers.
type workerStatus struct {
	ID          string    `json:"id"` // host:pid
	Running     int       `json:"running"`
	Concurrency int       `json:"concurrency"`
	Finished    int64     `json:"finished"`          // episodes published
	Waiting     int       `json:"waiting,omitempty"` // results the server refused, to publish again
	Refused     string    `json:"refused,omitempty"` // why
	Holding     []uint64  `json:"holding,omitempty"` // the work stream sequences of the messages it holds
	Left        bool      `json:"left,omitempty"`    // it left, handing back what it held
	At          time.Time `json:"at"`
	// Lanes are its gateway's rate governor: its share of each lane's
	// limit, and its calls in flight and waiting.
	Lanes []laneStatus `json:"lanes,omitempty"`
}

// laneStatus is one lane of a worker's rate governor.
type laneStatus struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Limit    int    `json:"limit"`
	InFlight int    `json:"in_flight"`
	Waiting  int    `json:"waiting"`
}

// workersTTL is how long a worker that stopped reporting stays listed.
const workersTTL = 10 * time.Second

// AuthError is a server that refused this process's credentials.
type AuthError struct {
	URL string
	Err error
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("cluster: the server at %s refused our credentials (%v): set $PROCTOR_TOKEN to the workers' token (the file the coordinator's command names) or pass -creds", redactURL(e.URL), e.Err)
}

func (e *AuthError) Unwrap() error { return e.Err }

// dial connects to url, naming credential refusals.
func dial(url string, opts ...nats.Option) (*nats.Conn, error) {
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		if isAuthError(err) {
			return nil, &AuthError{URL: url, Err: err}
		}
		return nil, fmt.Errorf("cluster: connecting to %s: %w", redactURL(url), err)
	}
	return nc, nil
}

// isAuthError reports a server's refusal of our credentials.
func isAuthError(err error) bool {
	return err != nil && (errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || strings.Contains(strings.ToLower(err.Error()), "authorization"))
}

// isPerSubjectFull reports a publish refused because its subject already
// holds its one message: on a result subject, another worker won; on a
// work subject, the sample is already queued.
func isPerSubjectFull(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == 10077 && strings.Contains(apiErr.Description, "per subject") {
		return true
	}
	return err != nil && strings.Contains(err.Error(), "maximum messages per subject exceeded")
}

func putJSON(ctx context.Context, kv jetstream.KeyValue, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = kv.Put(ctx, key, b)
	return err
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}
