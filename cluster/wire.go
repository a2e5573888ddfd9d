package cluster

// The wire forms: a work message is an eval.Assignment as JSON, with each
// epoch's tag (trust.go); a result
// message is the record's canonical line (sink.Record.AppendJSON, one
// line, never a raw newline) followed, when the episode left a
// transcript, by a newline and the transcript as a JSON array of
// harness.Event. A result bigger than maxInline goes to the run's object
// store whole, and the message carries only its name in a header.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/recordjson"
	"github.com/proctor-evals/proctor/sink"
)

// maxInline is the largest result carried in its message (NATS's default
// max_payload is 1 MiB); bigger ones are stored in the object store.
const maxInline = 512 << 10

// blobHeader names the object holding a result too big for its message.
const blobHeader = "Proctor-Blob"

// encodeResult appends the wire form of f to b.
func encodeResult(b []byte, f *eval.Finished) ([]byte, error) {
	b = f.Record.AppendJSON(b)
	if len(f.Transcript) > 0 {
		tr, err := json.Marshal(f.Transcript)
		if err != nil {
			return nil, fmt.Errorf("cluster: encoding the transcript of %s epoch %d: %w", f.Record.SampleID, f.Record.Epoch, err)
		}
		b = append(append(b, '\n'), tr...)
	}
	return b, nil
}

// decodeResult decodes a result for the episode (sampleID, epoch) that
// its subject names: a record of another episode is refused, so that a
// result subject's first-writer-wins rule cannot be bypassed.
func decodeResult(body []byte, sampleID string, epoch int) (eval.Finished, error) {
	var f eval.Finished
	line, trace, hasTrace := bytes.Cut(body, []byte{'\n'})
	if len(line) == 0 {
		return f, errors.New("cluster: empty result")
	}
	if err := recordjson.DecodeLine(line, &f.Record, nil); err != nil {
		return f, fmt.Errorf("cluster: result record: %w", err)
	}
	if f.Record.SampleID != sampleID || f.Record.Epoch != epoch {
		return f, fmt.Errorf("cluster: result for sample %q epoch %d published as sample %q epoch %d", f.Record.SampleID, f.Record.Epoch, sampleID, epoch)
	}
	switch f.Record.Status {
	case sink.Pass, sink.Fail, sink.Error, sink.Unscored:
	default:
		return f, fmt.Errorf("cluster: result for sample %q epoch %d: unknown status %q", sampleID, epoch, f.Record.Status)
	}
	if hasTrace {
		var events []harness.Event
		if err := json.Unmarshal(trace, &events); err != nil {
			return f, fmt.Errorf("cluster: result transcript of sample %q epoch %d: %w", sampleID, epoch, err)
		}
		f.Transcript = events
	}
	return f, nil
}

// workMsg is a work message: the assignment, and its epochs' tags in
// the same order.
type workMsg struct {
	eval.Assignment
	Tags []string `json:"tags"`
}

// decodeAssignment decodes a work message queued for sampleID.
func decodeAssignment(body []byte, sampleID string) (workMsg, error) {
	var a workMsg
	if err := json.Unmarshal(body, &a); err != nil {
		return a, fmt.Errorf("cluster: work message: %w", err)
	}
	if a.SampleID != sampleID {
		return a, fmt.Errorf("cluster: work message for sample %q queued as %q", a.SampleID, sampleID)
	}
	if len(a.Tags) != len(a.Epochs) {
		return a, fmt.Errorf("cluster: work message for sample %q: %d tags for %d epochs", sampleID, len(a.Tags), len(a.Epochs))
	}
	for _, ep := range a.Epochs {
		if ep < 0 {
			return a, fmt.Errorf("cluster: work message for sample %q: negative epoch %d", sampleID, ep)
		}
	}
	return a, nil
}
