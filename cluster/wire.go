package cluster

// The wire forms: a work message is an distrib.Assignment as JSON, with each
// epoch's tag (trust.go). A results message is a batch: the results of
// the episodes a worker finished within a few milliseconds, each an entry
// (see appendEntry). A result's body is the record's canonical line
// (sink.Record.AppendJSON, one line, never a raw newline) followed, when
// the episode left a transcript, by a newline and the transcript as a
// JSON array of harness.Event. A body bigger than maxInline goes to the
// run's object store whole, and its entry carries only its name.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/internal/distrib"
	"github.com/proctor-evals/proctor/internal/recordjson"
	"github.com/proctor-evals/proctor/sink"
)

// maxInline is the largest result carried in its message (NATS's default
// max_payload is 1 MiB); bigger ones are stored in the object store.
const maxInline = 512 << 10

// A worker sends its batch when fewer than batchesInFlight are being
// stored, or when it reaches batchBytes or batchEntries: one stored (and,
// with every write synced, fsynced) message for the episodes that finished
// during the previous one's store. An entry is at most maxInline and a
// header, so a batch stays under 1 MiB.
const (
	unstoredPerSlot = 4 // see worker.busy
	batchesInFlight = 1
	batchBytes      = 256 << 10
	batchEntries    = 1024
)

// entry is one episode's result in a batch. Tag is the tag of its work;
// Blob and Digest, when set, name the object holding its body and the
// body's SHA-256 (hex), and Body is empty.
type entry struct {
	SampleID     string
	Epoch        int
	Tag          string
	Blob, Digest string
	Body         []byte
}

// appendEntry appends e to a batch: a header line of six space-separated
// fields, "<sample key> <epoch> <tag> <blob> <sha256> <length>" ("-" for
// an empty field; the sample key is base64url, so no field holds a space
// or a newline), then the body's length bytes.
func appendEntry(b []byte, e *entry) []byte {
	field := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	b = append(b, sampleKey(e.SampleID)...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(e.Epoch), 10)
	b = append(append(append(b, ' '), field(e.Tag)...), ' ')
	b = append(append(append(b, field(e.Blob)...), ' '), field(e.Digest)...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(e.Body)), 10)
	b = append(b, '\n')
	return append(b, e.Body...)
}

// decodeBatch decodes a results message: all its entries, or an error
// naming the first malformed one (a worker never sends one; a batch is
// refused whole rather than guessed at).
func decodeBatch(data []byte) ([]entry, error) {
	var out []entry
	for len(data) > 0 {
		i := len(out)
		line, rest, ok := bytes.Cut(data, []byte{'\n'})
		if !ok {
			return nil, fmt.Errorf("cluster: results entry %d: no header line", i)
		}
		f := bytes.Split(line, []byte{' '})
		if len(f) != 6 {
			return nil, fmt.Errorf("cluster: results entry %d: %d header fields, want 6", i, len(f))
		}
		id, err := base64.RawURLEncoding.Strict().DecodeString(string(f[0]))
		if err != nil || len(f[0]) == 0 {
			return nil, fmt.Errorf("cluster: results entry %d: sample key %q", i, f[0])
		}
		epoch, err := strconv.Atoi(string(f[1]))
		if err != nil || epoch < 0 {
			return nil, fmt.Errorf("cluster: results entry %d: epoch %q", i, f[1])
		}
		n, err := strconv.Atoi(string(f[5]))
		if err != nil || n < 0 || n > len(rest) {
			return nil, fmt.Errorf("cluster: results entry %d: length %q of %d bytes left", i, f[5], len(rest))
		}
		field := func(b []byte) string {
			if string(b) == "-" {
				return ""
			}
			return string(b)
		}
		e := entry{SampleID: string(id), Epoch: epoch, Tag: field(f[2]), Blob: field(f[3]), Digest: field(f[4]), Body: rest[:n:n]}
		if (e.Blob == "") != (e.Digest == "") || e.Blob != "" && n > 0 {
			return nil, fmt.Errorf("cluster: results entry %d: a body must be inline or an object with its digest", i)
		}
		out = append(out, e)
		data = rest[n:]
	}
	if len(out) == 0 {
		return nil, errors.New("cluster: an empty results message")
	}
	return out, nil
}

// encodeResult appends the wire form of f to b.
func encodeResult(b []byte, f *distrib.Finished) ([]byte, error) {
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
// its entry names, epoch being the episode's slot (distrib.Assignment),
// which slot finds from a record: a record of another episode is
// refused, so that an episode's tag vouches for its record only.
func decodeResult(body []byte, sampleID string, epoch int, slot func(*sink.Record) (int, bool)) (distrib.Finished, error) {
	var f distrib.Finished
	line, trace, hasTrace := bytes.Cut(body, []byte{'\n'})
	if len(line) == 0 {
		return f, errors.New("cluster: empty result")
	}
	if err := recordjson.DecodeLine(line, &f.Record, nil); err != nil {
		return f, fmt.Errorf("cluster: result record: %w", err)
	}
	if s, ok := slot(&f.Record); f.Record.SampleID != sampleID || !ok || s != epoch {
		return f, fmt.Errorf("cluster: result for sample %q%s epoch %d sent as sample %q slot %d", f.Record.SampleID, variantNamed(f.Record.Variant), f.Record.Epoch, sampleID, epoch)
	}
	f.Slot = epoch
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
	distrib.Assignment
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

// variantNamed names a record's variant in a message, if it has one.
func variantNamed(v string) string {
	if v == "" {
		return ""
	}
	return " variant " + strconv.Quote(v)
}
