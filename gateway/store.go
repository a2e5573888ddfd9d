package gateway

// The call store: every completed metered call of a keyed episode, its
// normalized request's digest and its response (a stream as its events),
// one JSON line each in a file beside the log (sidecar.Calls). It is
// written through package jsonl's Writer (its lock, its group-committed
// fsync), each line written to the file before the last bytes of its
// answer go on to the agent, so that an answer the agent acknowledged by
// its next call is never lost to a crash of this process.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/usage"
)

// maxStoredBytes bounds a response the store keeps; a larger one is
// forwarded and recorded but not stored (a replay goes live there).
const maxStoredBytes = 32 << 20

// Keyed is the optional interface of a Meter whose episode the call store
// keeps: its calls are stored under (variant, sample, epoch), and an
// episode opened again with the same key is answered from the store while
// its requests match the recorded ones (see [Gateway.OpenStore]). The
// variant is empty for an eval without variants. (Plain values, not a
// CallKey: the engine implements it without importing this package.)
type Keyed interface {
	CallKey() (variant, sample string, epoch int)
}

// CallKey is an episode's key in the call store: the attempts of one
// episode share it, and variants of one sample and epoch do not.
type CallKey struct {
	Variant string // empty for an eval without variants
	Sample  string
	Epoch   int
}

// String names the episode in errors.
func (k CallKey) String() string {
	if k.Variant == "" {
		return fmt.Sprintf("sample %q epoch %d", k.Sample, k.Epoch)
	}
	return fmt.Sprintf("variant %q sample %q epoch %d", k.Variant, k.Sample, k.Epoch)
}

// storedCall is one line of the call store.
type storedCall struct {
	Variant string `json:"variant,omitempty"`
	Sample  string `json:"sample"`
	Epoch   int    `json:"epoch"`
	// Seq is the call's place in its episode: a line of Seq k replaces
	// the episode's calls from k on (an attempt that went live there).
	Seq    int    `json:"seq"`
	Req    string `json:"req"` // requestDigest: hex SHA-256
	API    string `json:"api"`
	Model  string `json:"model,omitempty"`
	Status int    `json:"status"`
	Type   string `json:"type,omitempty"` // the response's Content-Type
	// Body is a non-streamed response; Events a streamed one, each event
	// with its blank line, as the provider sent it.
	Body   string      `json:"body,omitempty"`
	Events []string    `json:"events,omitempty"`
	Usage  usage.Usage `json:"usage"`
}

// key is the episode c belongs to.
func (c *storedCall) key() CallKey { return CallKey{c.Variant, c.Sample, c.Epoch} }

// decodeStoredCall decodes and checks one line of a call store.
func decodeStoredCall(line []byte) (storedCall, error) {
	var c storedCall
	d := json.NewDecoder(bytes.NewReader(line))
	d.DisallowUnknownFields()
	if err := d.Decode(&c); err != nil {
		return c, err
	}
	if d.More() {
		return c, errors.New("more than one JSON value on the line")
	}
	switch {
	case c.Seq < 0:
		return c, fmt.Errorf("seq %d is negative", c.Seq)
	case len(c.Req) != 64 || !isHex(c.Req):
		return c, fmt.Errorf("req %q is not a SHA-256 digest", c.Req)
	case c.API != apiChat && c.API != apiResponses && c.API != apiMessages:
		return c, fmt.Errorf("api %q is not a metered API", c.API)
	case c.Status < 200 || c.Status > 299:
		return c, fmt.Errorf("status %d is not a success", c.Status)
	case c.Body != "" && len(c.Events) > 0:
		return c, errors.New("both a body and events")
	}
	return c, nil
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// requestDigest is the digest of a metered request as the store keys it:
// its API, its query and its body with JSON's insignificant differences
// (white space, the order of an object's keys) normalized away. A body
// that is not JSON is taken byte for byte.
func requestDigest(api, query string, body []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", api, query)
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if d.Decode(&v) == nil && !d.More() {
		if b, err := json.Marshal(v); err == nil {
			body = b
		}
	}
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// storedRef is where one recorded call is: its request's digest and its
// line's offset.
type storedRef struct {
	req string
	off int64
}

// store is an open call store: the episodes' recorded calls, by offset.
type store struct {
	path   string
	w      *jsonl.Writer // nil: read only (a development cache)
	mu     sync.Mutex
	chains map[CallKey][]storedRef
	byReq  map[cacheKey]int64 // the first response to each request, per epoch
	err    error              // the first write error, reported by close
	shared *StoreShare        // the fleet's copy (ShareStore); nil alone
}

type cacheKey struct {
	req   string
	epoch int
}

// openStore recovers the call store at path and opens it for appending,
// creating it if missing. A torn tail (a line a crash cut short) is cut
// off and returned; a corrupt line elsewhere is an error, the file left
// as it is.
func openStore(path string) (*store, *jsonl.TornTailError, error) {
	w, err := jsonl.Append(path, nil)
	if err != nil {
		return nil, nil, err
	}
	s := &store{path: path, w: w}
	torn, err := s.load(false)
	if err == nil && torn != nil {
		err = w.CutTo(torn.Offset)
	}
	if err != nil {
		w.Close(context.Background())
		return nil, nil, err
	}
	return s, torn, nil
}

// openCache reads the call store at path for lookups by request and
// epoch, never writing it; a torn tail is skipped, not cut.
func openCache(path string) (*store, error) {
	s := &store{path: path}
	if _, err := s.load(true); err != nil {
		return nil, err
	}
	return s, nil
}

// load indexes the store's lines. A last line that is incomplete or does
// not decode is a torn tail; any other that does not decode is a
// *jsonl.CorruptError.
func (s *store) load(cache bool) (*jsonl.TornTailError, error) {
	s.chains, s.byReq = map[CallKey][]storedRef{}, map[cacheKey]int64{}
	f, err := os.Open(s.path)
	if err != nil {
		return nil, fmt.Errorf("gateway: the call store: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var off int64
	for num := 1; ; num++ {
		line, err := r.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("gateway: reading the call store %s: %w", s.path, err)
		}
		if len(line) == 0 {
			return nil, nil
		}
		if err == io.EOF { // no newline: cut short
			return &jsonl.TornTailError{Path: s.path, Line: num, Offset: off, Bytes: int64(len(line))}, nil
		}
		if len(bytes.TrimSpace(line)) > 0 {
			c, derr := decodeStoredCall(line)
			if derr != nil {
				if _, err := r.Peek(1); err == io.EOF {
					return &jsonl.TornTailError{Path: s.path, Line: num, Offset: off, Bytes: int64(len(line))}, nil
				}
				return nil, &jsonl.CorruptError{Path: s.path, Line: num, Err: derr}
			}
			s.index(c, off)
		}
		off += int64(len(line))
	}
}

// index adds the call at off: it replaces its episode's calls from its
// Seq on.
func (s *store) index(c storedCall, off int64) {
	k := c.key()
	chain := s.chains[k]
	if c.Seq <= len(chain) {
		// A full slice expression: episodes replaying the old chain keep it.
		s.chains[k] = append(chain[:c.Seq:c.Seq], storedRef{c.Req, off})
	}
	ck := cacheKey{c.Req, c.Epoch}
	if _, ok := s.byReq[ck]; !ok {
		s.byReq[ck] = off
	}
}

// chain returns the recorded calls of an episode, in order.
func (s *store) chain(k CallKey) []storedRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.chains[k]
}

// lookup returns the offset of a response to req in epoch.
func (s *store) lookup(req string, epoch int) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	off, ok := s.byReq[cacheKey{req, epoch}]
	return off, ok
}

// read reads the call at off.
func (s *store) read(off int64) (storedCall, error) {
	line, err := jsonl.ReadLineAt(s.path, off)
	if err != nil {
		return storedCall{}, err
	}
	c, err := decodeStoredCall(line)
	if err != nil {
		return c, fmt.Errorf("gateway: the call store %s at offset %d: %w", s.path, off, err)
	}
	return c, nil
}

// put appends c and writes it to the file, and to the fleet's copy when
// shared, before returning.
func (s *store) put(c storedCall) error {
	line, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := s.write(c, line); err != nil {
		return err
	}
	s.mu.Lock()
	sh := s.shared
	s.mu.Unlock()
	if sh != nil {
		// Outside the lock: the fleet's copy is a network away, and the
		// other episodes' calls need not wait for this one's.
		if err := sh.Put(c.key(), line); err != nil {
			s.mu.Lock()
			if s.err == nil {
				s.err = fmt.Errorf("gateway: the fleet's call store: %w", err)
			}
			s.mu.Unlock()
		}
	}
	return nil
}

// write appends c's line to the file and indexes it.
func (s *store) write(c storedCall, line []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return nil
	}
	off, err := s.w.WriteLineNow(line)
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		return err
	}
	s.index(c, off)
	return nil
}

// importShared adds the fleet's recorded calls of episode k (another
// process's, whose episode this one resumes) to the store, in the order
// the fleet kept them, so that its chain is the fleet's. A line that does
// not decode, or is another episode's, is an error and none is added.
func (s *store) importShared(k CallKey) error {
	s.mu.Lock()
	sh := s.shared
	s.mu.Unlock()
	if sh == nil || s.w == nil {
		return nil
	}
	lines, err := sh.Load(k)
	if err != nil || len(lines) == 0 {
		return err
	}
	calls := make([]storedCall, len(lines))
	for i, line := range lines {
		c, err := decodeStoredCall(line)
		if err != nil {
			return fmt.Errorf("gateway: the fleet's call store, call %d of %v: %w", i+1, k, err)
		}
		if c.key() != k {
			return fmt.Errorf("gateway: the fleet's call store: call %d of %v is %v", i+1, k, c.key())
		}
		calls[i] = c
	}
	for _, c := range calls {
		// Encoded again, not copied: a line of the fleet's may be JSON
		// spread over several lines, which would corrupt this file.
		line, err := json.Marshal(c)
		if err != nil {
			return err
		}
		if err := s.write(c, line); err != nil {
			return err
		}
	}
	return nil
}

// flush fsyncs what was written.
func (s *store) flush() error {
	if s.w == nil {
		return nil
	}
	return s.w.Flush()
}

// close flushes and closes the store; it returns the first error of a
// write, if any.
func (s *store) close() error {
	if s.w == nil {
		return nil
	}
	err := s.w.Close(context.Background())
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	return err
}

// events splits a stream into its events, each with the blank line that
// ends it (LF or CRLF line ends); what follows the last is one more.
func events(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := bytes.Index(b, []byte("\n\n"))
		j := bytes.Index(b, []byte("\r\n\r\n"))
		n := len(b)
		switch {
		case i >= 0 && (j < 0 || i < j):
			n = i + 2
		case j >= 0:
			n = j + 4
		}
		out = append(out, string(b[:n]))
		b = b[n:]
	}
	return out
}
