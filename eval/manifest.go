package eval

// The run manifest: what a log's run is, written beside the log when the
// run starts and checked when it resumes, so that a log of another eval,
// or of a changed harness or judge, is never silently adopted.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"
)

// Versions name the versions of an eval's components. Results recorded
// under other versions are stale: a run does not resume a log written
// under other versions unless Config.AllowChanged is set. Any string will
// do (a semantic version, a commit, a hash of a prompt); empty means
// unversioned.
type Versions struct {
	Harness string `json:"harness,omitempty"`
	Judge   string `json:"judge,omitempty"`
	Sandbox string `json:"sandbox,omitempty"`
}

// Manifest is what a run is: stored as JSON beside its log
// (run.jsonl → run.manifest.json).
type Manifest struct {
	Schema    int       `json:"schema"`
	RunID     string    `json:"run_id"`
	Eval      string    `json:"eval"`
	CreatedAt time.Time `json:"created_at"`
	Epochs    int       `json:"epochs"`
	// Seed is a string: JSON readers that parse numbers as float64 would
	// round a uint64.
	Seed     string   `json:"seed"`
	Versions Versions `json:"versions,omitzero"`
	// Dataset identifies the samples: their number and a hash of their IDs
	// and inputs in dataset order.
	Dataset DatasetIdentity `json:"dataset"`
	// Proctor is the module version that wrote the manifest.
	Proctor string `json:"proctor,omitempty"`
}

// DatasetIdentity identifies a dataset by content.
type DatasetIdentity struct {
	Samples int    `json:"samples"`
	Hash    string `json:"hash"` // sha256 over each sample's ID and input JSON
}

const manifestSchema = 1

// ManifestPath is where the manifest of the run logged at log is kept.
func ManifestPath(log string) string {
	return strings.TrimSuffix(log, filepath.Ext(log)) + ".manifest.json"
}

// ReadManifest reads the manifest of the run logged at log. A log written
// before manifests existed has none: the error satisfies
// errors.Is(err, fs.ErrNotExist).
func ReadManifest(log string) (*Manifest, error) {
	path := ManifestPath(log)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("eval: manifest: %w", err)
	}
	var m Manifest
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("eval: manifest %s: %w", path, err)
	}
	if m.Schema != manifestSchema {
		return nil, fmt.Errorf("eval: manifest %s: schema %d, this proctor reads %d", path, m.Schema, manifestSchema)
	}
	return &m, nil
}

// writeManifest writes m beside log atomically (a temporary file renamed
// over it), so that a crash leaves the old manifest or the new one.
func writeManifest(log string, m *Manifest) error {
	path := ManifestPath(log)
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".manifest-*.tmp")
	if err != nil {
		return fmt.Errorf("eval: manifest: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	if _, err := tmp.Write(append(b, '\n')); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("eval: manifest: %w", err)
	}
	return nil
}

// ManifestMismatchError reports a resume against a log of another run
// shape: another eval, other component versions, another seed.
type ManifestMismatchError struct {
	Log   string
	Diffs []string // "judge version: \"v1\" in the log, \"v2\" now"
}

func (e *ManifestMismatchError) Error() string {
	return fmt.Sprintf("eval: the log %s was written by a different run (%s); use a new log, or set Config.AllowChanged to resume it anyway",
		e.Log, strings.Join(e.Diffs, "; "))
}

// diff lists what differs between the manifest a log holds (old) and this
// run's (m) that makes the log's records stale. A grown or changed
// dataset and more or fewer epochs are not stale: added samples and epochs
// run, removed ones are excluded from the report.
func (m *Manifest) diff(old *Manifest) []string {
	var d []string
	add := func(what, was, now string) {
		if was != now {
			d = append(d, fmt.Sprintf("%s: %q in the log, %q now", what, was, now))
		}
	}
	add("eval", old.Eval, m.Eval)
	add("seed", old.Seed, m.Seed)
	add("harness version", old.Versions.Harness, m.Versions.Harness)
	add("judge version", old.Versions.Judge, m.Versions.Judge)
	add("sandbox version", old.Versions.Sandbox, m.Versions.Sandbox)
	return d
}

// datasetIdentity hashes IDs and input JSON in order; inputs is called for
// each sample index and returns its input's JSON.
func datasetIdentity(n int, id func(int) string, input func(int) []byte) DatasetIdentity {
	h := sha256.New()
	var lenbuf [8]byte
	put := func(b []byte) {
		l := len(b)
		for i := range lenbuf {
			lenbuf[i] = byte(l >> (8 * i))
		}
		h.Write(lenbuf[:])
		h.Write(b)
	}
	for i := range n {
		put([]byte(id(i)))
		put(input(i))
	}
	return DatasetIdentity{Samples: n, Hash: hex.EncodeToString(h.Sum(nil))}
}

func proctorVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	if bi.Main.Path == "github.com/proctor-evals/proctor" {
		return bi.Main.Version
	}
	if i := slices.IndexFunc(bi.Deps, func(m *debug.Module) bool { return m.Path == "github.com/proctor-evals/proctor" }); i >= 0 {
		return bi.Deps[i].Version
	}
	return ""
}
