package gateway

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sink/jsonl"
	"github.com/proctor-evals/proctor/usage"
)

func stored(sample string, seq int, req string) storedCall {
	return storedCall{Sample: sample, Epoch: 0, Seq: seq, Req: strings.Repeat(req, 64), API: apiChat, Model: "m", Status: 200,
		Type: "application/json", Body: `{"n":"` + req + `"}`, Usage: usage.Usage{InputTokens: 10, OutputTokens: 2}}
}

func chainReqs(s *store, sample string) string {
	var b strings.Builder
	for _, r := range s.chain(CallKey{Sample: sample}) {
		b.WriteByte(r.req[0])
	}
	return b.String()
}

// TestStoreChainsFollowTheLastAttempt: a call stored at Seq k replaces its
// episode's recording from k on, and that holds again when the store is
// read back.
func TestStoreChainsFollowTheLastAttempt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.calls.jsonl")
	s, torn, err := openStore(path)
	require.NoError(t, err)
	require.Nil(t, torn)
	for i, r := range "abcd" {
		require.NoError(t, s.put(stored("x", i, string(r))))
	}
	require.NoError(t, s.put(stored("y", 0, "e")))
	// A second attempt replays a, b, then goes live at 2.
	require.NoError(t, s.put(stored("x", 2, "f")))
	require.NoError(t, s.put(stored("x", 3, "1")))
	require.Equal(t, "abf1", chainReqs(s, "x"))
	require.NoError(t, s.close())

	r, torn, err := openStore(path)
	require.NoError(t, err)
	require.Nil(t, torn)
	defer r.close()
	require.Equal(t, "abf1", chainReqs(r, "x"))
	require.Equal(t, "e", chainReqs(r, "y"))
	got, err := r.read(r.chain(CallKey{Sample: "x"})[2].off)
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(stored("x", 2, "f"), got))
}

// TestStoreTornTailIsCutAndReported: a line a crash cut short (no
// newline, or a newline but not a whole call) is reported and cut, the
// calls before it kept; the next call starts on a line of its own.
func TestStoreTornTailIsCutAndReported(t *testing.T) {
	for _, tail := range []string{`{"sample":"x","epoch":0,"se`, "{\"sample\":\"x\",\"ep\n"} {
		path := filepath.Join(t.TempDir(), "run.calls.jsonl")
		s, _, err := openStore(path)
		require.NoError(t, err)
		require.NoError(t, s.put(stored("x", 0, "a")))
		require.NoError(t, s.close())
		whole, err := os.ReadFile(path)
		require.NoError(t, err)
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		f.WriteString(tail)
		f.Close()

		s, torn, err := openStore(path)
		require.NoError(t, err)
		require.Equal(t, &jsonl.TornTailError{Path: path, Line: 2, Offset: int64(len(whole)), Bytes: int64(len(tail))}, torn)
		require.NoError(t, s.put(stored("x", 1, "b")))
		require.NoError(t, s.close())
		r, torn, err := openStore(path)
		require.NoError(t, err)
		require.Nil(t, torn)
		require.Equal(t, "ab", chainReqs(r, "x"))
		r.close()
	}
}

// TestStoreCorruptLineIsAnErrorNotCut: a line that is not a call with
// calls after it is no crash's: an error naming file and line, the file
// left as it was.
func TestStoreCorruptLineIsAnErrorNotCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.calls.jsonl")
	s, _, err := openStore(path)
	require.NoError(t, err)
	require.NoError(t, s.put(stored("x", 0, "a")))
	s.w.WriteLineNow([]byte(`{"sample":"x","seq":-1}`))
	require.NoError(t, s.put(stored("x", 1, "b")))
	require.NoError(t, s.close())
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	_, _, err = openStore(path)
	var corrupt *jsonl.CorruptError
	require.True(t, errors.As(err, &corrupt), "%v", err)
	require.Equal(t, 2, corrupt.Line)
	require.Contains(t, err.Error(), path)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after)
}

// TestStoreIsLockedByItsWriter: a second writer of the same store (another
// process resuming the same log) fails at once.
func TestStoreIsLockedByItsWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.calls.jsonl")
	s, _, err := openStore(path)
	require.NoError(t, err)
	defer s.close()
	_, _, err = openStore(path)
	var locked *jsonl.LockedError
	require.True(t, errors.As(err, &locked), "%v", err)
}

// TestRequestDigestNormalizesJSON: key order and white space do not
// change a request's digest; a value, the API or the query does.
func TestRequestDigestNormalizesJSON(t *testing.T) {
	a := requestDigest(apiChat, "", []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"n":1.50}`))
	require.Equal(t, a, requestDigest(apiChat, "", []byte("{ \"n\": 1.50,\n \"messages\":[{\"content\":\"hi\",\"role\":\"user\"}], \"model\":\"m\"}")))
	require.NotEqual(t, a, requestDigest(apiChat, "", []byte(`{"model":"m","messages":[{"role":"user","content":"hi!"}],"n":1.50}`)))
	require.NotEqual(t, a, requestDigest(apiResponses, "", []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"n":1.50}`)))
	require.NotEqual(t, a, requestDigest(apiChat, "beta=true", []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"n":1.50}`)))
	require.NotEqual(t, requestDigest(apiChat, "", []byte(`{"n":12345678901234567890}`)), requestDigest(apiChat, "", []byte(`{"n":12345678901234567891}`)))
}

// TestEventsSplitAStreamWhole: the events put back together are the
// stream byte for byte, whatever its line ends.
func TestEventsSplitAStreamWhole(t *testing.T) {
	for _, s := range []string{"data: a\n\ndata: b\n\n", "event: x\r\ndata: a\r\n\r\ndata: [DONE]\r\n\r\n", "data: a\n\ndata: cut", ""} {
		ev := events([]byte(s))
		require.Equal(t, s, strings.Join(ev, ""))
	}
	require.Equal(t, []string{"data: a\n\n", "event: b\ndata: c\n\n"}, events([]byte("data: a\n\nevent: b\ndata: c\n\n")))
}
