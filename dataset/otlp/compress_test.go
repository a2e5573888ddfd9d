package otlp_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/dataset/otlp"
)

// The Collector's file exporter with compression zstd writes each export
// request as a 4-byte big-endian length and a zstd frame; with its
// exporter.file.nativeCompression gate, a zstd stream of the JSON lines.
// Both load as the plain file does, errors naming the file and the line
// (the message) of the decompressed text.
func TestTracesCompressedAsTheCollectorWrites(t *testing.T) {
	t.Parallel()
	plain, err := os.ReadFile(fixture)
	require.NoError(t, err)
	enc, err := zstd.NewWriter(nil)
	require.NoError(t, err)
	var messages []byte
	for _, l := range bytes.Split(bytes.TrimSpace(plain), []byte("\n")) {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		frame := enc.EncodeAll(l, nil)
		messages = binary.BigEndian.AppendUint32(messages, uint32(len(frame)))
		messages = append(messages, frame...)
	}
	dir := t.TempDir()
	want := collect(t, otlp.Traces(fixture, nil))
	for name, data := range map[string][]byte{
		"messages.zst": messages,
		"native.zst":   enc.EncodeAll(plain, nil),
	} {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, data, 0o644))
		require.Equal(t, want, collect(t, otlp.Traces(path, nil)), name)
	}

	// A bad second message, and a message cut short.
	bad := binary.BigEndian.AppendUint32(nil, uint32(len(enc.EncodeAll([]byte(line(goodSpan)), nil))))
	bad = append(bad, enc.EncodeAll([]byte(line(goodSpan)), nil)...)
	frame := enc.EncodeAll([]byte("[1,2]"), nil)
	bad = append(binary.BigEndian.AppendUint32(bad, uint32(len(frame))), frame...)
	for _, tc := range []struct {
		data []byte
		line int
		msg  string
	}{
		{bad, 2, "want a JSON object"},
		{messages[:len(messages)-3], 4, "truncated or corrupt zstd stream: unexpected EOF"},
	} {
		path := filepath.Join(dir, "bad.zst")
		require.NoError(t, os.WriteFile(path, tc.data, 0o644))
		_, err := dataset.Collect(context.Background(), otlp.Traces(path, nil))
		var re *dataset.RowError
		require.ErrorAs(t, err, &re)
		require.Equal(t, path, re.File)
		require.Equal(t, tc.line, re.Line, "%v", err)
		require.ErrorContains(t, err, tc.msg)
	}
}
