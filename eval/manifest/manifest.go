// Package manifest is the run manifest: what a log's run is (its eval,
// seed, epochs, component versions and dataset), stored as JSON beside
// the log (run.jsonl → run.manifest.json). The engine writes it when a run
// starts and checks it when a run resumes, so that a log of another eval,
// or of a changed harness or judge, is never silently adopted; `proctor
// merge` checks that shard logs are of one run.
//
// The package imports only the standard library, so that the command line
// reads manifests without linking the evaluation engine.
package manifest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/bits"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/proctor-evals/proctor/internal/atomicfile"
	"github.com/proctor-evals/proctor/internal/safeopen"
	"github.com/proctor-evals/proctor/internal/sidecar"
)

// Schema is the version of the manifest's JSON form that this package
// reads and writes.
const Schema = 1

// Versions name the versions of an eval's components. Results recorded
// under other versions are stale: a run does not resume a log written
// under other versions unless it is told to. Any string will do (a
// semantic version, a commit, a hash of a prompt); empty means
// unversioned.
type Versions struct {
	Harness string `json:"harness,omitempty"`
	Judge   string `json:"judge,omitempty"`
	Sandbox string `json:"sandbox,omitempty"`
}

// Manifest is what a run is.
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
	// and inputs in dataset order. For a shard it is the whole dataset's,
	// not the shard's part, so that every shard of a run names the same.
	// Hash is empty until the run has hashed its dataset.
	Dataset DatasetIdentity `json:"dataset"`
	// Shard is "I/N" (0-based I) for the log of one shard of a run, empty
	// for a whole run and for a merged log.
	Shard string `json:"shard,omitempty"`
	// Proctor is the module version that wrote the manifest.
	Proctor string `json:"proctor,omitempty"`
	// Sequential is the run's sequential gate, as package eval/report
	// writes it (report.Sequential, with its claim order and pinned
	// baseline): a report of the log decides it again. A run resumed with
	// another gate, or with other data under it, is refused (GateDiff),
	// since choosing a gate after seeing results voids its error rate.
	Sequential json.RawMessage `json:"sequential,omitempty"`
	// Budget is the run's budgets as its latest start set them, for the
	// viewer; nil without any. It is not part of what a run is: a resumed
	// run may change it.
	Budget *Budget `json:"budget,omitempty"`
	// Resources are the distinct sandbox resources the run's samples ask
	// for (their limits and image, sandbox.Resources.String), sorted; nil
	// without a sandbox, and in logs written before they were recorded.
	// A resume under others is refused (Diff) unless allowed: a memory
	// limit alone moves a pass rate by points.
	Resources []string `json:"resources,omitempty"`
	// ImageDigests are what the images of Resources resolved to as the
	// run's environments were provisioned ("image=digest", sorted), as
	// far as the driver says (the Docker driver does). Added as the run
	// goes; a resume that finds other digests warns.
	ImageDigests []string `json:"image_digests,omitempty"`
	// Variants are the eval's harness variants, in the eval's order; nil
	// for an eval without them. Each variant's harness version replaces
	// Versions.Harness for its episodes.
	Variants []Variant `json:"variants,omitempty"`
	// Eliminations are the variants the run stopped running because
	// another was better with anytime-valid confidence (adaptive depth
	// across variants), in the order they were decided.
	Eliminations []Elimination `json:"eliminations,omitempty"`
	// EliminateVariants is the run's error rate of eliminations
	// (eval.Config.EliminateVariants); 0 when it eliminates nothing. A
	// distributed run's workers take from it elimination's rule that an
	// episode is drawn once (an errored attempt is final).
	EliminateVariants float64 `json:"eliminate_variants,omitempty"`
}

// Variant is one of an eval's harness variants, as a manifest names it.
type Variant struct {
	Name    string `json:"name"`
	Harness string `json:"harness,omitempty"` // its harness version
}

// Elimination is a variant a run stopped running: By was better, with
// the run's error rate Alpha, after AfterSamples samples had been run for
// both; its Saved episodes were never run.
type Elimination struct {
	Variant      string  `json:"variant"`
	By           string  `json:"by"`
	Alpha        float64 `json:"alpha"`
	AfterSamples int     `json:"after_samples"`
	Saved        int     `json:"saved"`
}

// Budget is a run's budgets (eval.Config.MaxCostUSD and MaxTokens).
type Budget struct {
	CostUSD float64 `json:"cost_usd,omitempty"`
	Tokens  int64   `json:"tokens,omitempty"`
	// The per-episode caps (MaxEpisodeCostUSD, MaxEpisodeTokens): an
	// episode that ended at one is run again on resume only when they
	// changed.
	EpisodeCostUSD float64 `json:"episode_cost_usd,omitempty"`
	EpisodeTokens  int64   `json:"episode_tokens,omitempty"`
}

// DatasetIdentity identifies a dataset by content.
type DatasetIdentity struct {
	Samples int    `json:"samples"`
	Hash    string `json:"hash"` // "sum:" and the hex of the IdentitySum's hash; see Comparable
}

// sumScheme prefixes the hashes of IdentitySum. Logs written before it
// hold a SHA-256 of the samples in order, bare hex, which no identity
// computed now can equal.
const sumScheme = "sum:"

// Comparable reports whether d and e are both known and computed the same
// way, so that different hashes mean different datasets (and not a log
// written by an older proctor).
func (d DatasetIdentity) Comparable(e DatasetIdentity) bool {
	return d.Hash != "" && e.Hash != "" && strings.HasPrefix(d.Hash, sumScheme) == strings.HasPrefix(e.Hash, sumScheme)
}

// Path is where the manifest of the run logged at log is kept.
func Path(log string) string { return sidecar.Manifest(log) }

// Read reads the manifest of the run logged at log. A log written before
// manifests existed has none: the error satisfies
// errors.Is(err, fs.ErrNotExist).
func Read(log string) (*Manifest, error) {
	path := Path(log)
	b, err := safeopen.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	return decode(path, b)
}

func decode(path string, b []byte) (*Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("manifest: %s: %w", path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("manifest: %s: data after the manifest's JSON object", path)
	}
	if m.Schema != Schema {
		return nil, fmt.Errorf("manifest: %s: schema %d, this proctor reads %d", path, m.Schema, Schema)
	}
	return &m, nil
}

// Write writes m beside log atomically (a temporary file renamed over the
// manifest), so that a crash leaves the old manifest or the new one.
func Write(log string, m *Manifest) error {
	path := Path(log)
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	err = atomicfile.Write(path, 0o644, func(w *bufio.Writer) error {
		w.Write(b)
		return w.WriteByte('\n')
	})
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	return nil
}

// MismatchError reports a resume against a log of another run shape:
// another eval, other component versions, another seed.
type MismatchError struct {
	Log   string
	Diffs []string // "judge version: \"v1\" in the log, \"v2\" now"
	// Gate is set when what differs is what a sequential gate rests on
	// (GateDiff), which no resume may change.
	Gate bool
}

func (e *MismatchError) Error() string {
	if e.Gate {
		return fmt.Sprintf("manifest: the log %s holds a sequential gate over other data (%s); a gate's data is fixed before it runs: use a new log",
			e.Log, strings.Join(e.Diffs, "; "))
	}
	return fmt.Sprintf("manifest: the log %s was written by a different run (%s); use a new log, or allow the change (eval.Config.AllowChanged) to resume it anyway",
		e.Log, strings.Join(e.Diffs, "; "))
}

// Diff lists what differs between the manifest a log holds (old) and this
// run's (m) that makes the log's records stale. A grown or changed
// dataset and more or fewer epochs are not stale: added samples and epochs
// run, removed ones are excluded from the report. Another shard is: the
// log would hold two shards' episodes.
func (m *Manifest) Diff(old *Manifest) []string {
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
	add("shard", old.Shard, m.Shard)
	if old.Resources != nil && !slices.Equal(old.Resources, m.Resources) {
		d = append(d, fmt.Sprintf("sandbox resources: %s in the log, %s now", ResourcesString(old.Resources), ResourcesString(m.Resources)))
	}
	return d
}

// ResourcesString is a manifest's Resources in one line.
func ResourcesString(r []string) string {
	if len(r) == 0 {
		return "none"
	}
	return "[" + strings.Join(r, "; ") + "]"
}

// ResourcesDiff says how the sandbox resources of two runs differ (their
// limits and images, then the digests their images resolved to), or ""
// when they are the same or either run did not record them: a possible
// cause of a difference between the runs.
func ResourcesDiff(base, head *Manifest) string {
	if base == nil || head == nil {
		return ""
	}
	var d []string
	if base.Resources != nil && head.Resources != nil && !slices.Equal(base.Resources, head.Resources) {
		d = append(d, fmt.Sprintf("sandbox resources %s → %s", ResourcesString(base.Resources), ResourcesString(head.Resources)))
	}
	if base.ImageDigests != nil && head.ImageDigests != nil && !slices.Equal(base.ImageDigests, head.ImageDigests) {
		d = append(d, fmt.Sprintf("image digests %s → %s", ResourcesString(base.ImageDigests), ResourcesString(head.ImageDigests)))
	}
	return strings.Join(d, ", ")
}

// GateDiff lists what differs between the manifest a log holds (old) and
// this run's (m) in what a sequential gate's decision rests on: the gate
// (bar or baseline and margin, α, method), its claim order (the dataset's
// samples after any subset or selection, drawn with the seed), the pinned
// baseline's figures, the epochs and the dataset's identity. Any of them
// changed makes another gate over the same results, a second look at α:
// no resume may change them, not even one allowed to change versions.
func (m *Manifest) GateDiff(old *Manifest) []string {
	if len(old.Sequential) == 0 && len(m.Sequential) == 0 {
		return nil
	}
	var d []string
	add := func(what, was, now string) {
		if was != now {
			d = append(d, fmt.Sprintf("%s: %s in the log, %s now", what, was, now))
		}
	}
	was, now := gateParts(old.Sequential), gateParts(m.Sequential)
	add("sequential gate", was.rest, now.rest)
	// A log written before the order and the base figures were on record
	// has neither: the resume puts them there (the order follows from the
	// seed and the dataset, checked here).
	if was.order != "" && was.order != now.order {
		d = append(d, "the gate's claim order: the dataset's samples, the selection or the seed changed")
	}
	if was.base != "" && was.base != now.base {
		d = append(d, "the gate's baseline: its per-sample figures changed")
	}
	add("epochs", fmt.Sprint(old.Epochs), fmt.Sprint(m.Epochs))
	add("seed", old.Seed, m.Seed)
	if old.Dataset.Comparable(m.Dataset) {
		add("dataset", fmt.Sprintf("%d samples %s", old.Dataset.Samples, old.Dataset.Hash), fmt.Sprintf("%d samples %s", m.Dataset.Samples, m.Dataset.Hash))
	}
	return d
}

// gate is a gate's JSON in parts: its order, its baseline's figures and
// the rest, each compact.
type gate struct{ order, base, rest string }

func gateParts(raw json.RawMessage) gate {
	if len(raw) == 0 {
		return gate{rest: "none"}
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return gate{rest: compact(raw)}
	}
	g := gate{order: compact(fields["order"]), base: compact(fields["base"])}
	delete(fields, "order")
	delete(fields, "base")
	rest, _ := json.Marshal(fields) // sorted keys
	g.rest = string(rest)
	return g
}

// A Difference is a field in which two manifests of what should be one
// run differ, with its value in each.
type Difference struct {
	Field string // "seed", "dataset hash", …
	A, B  string
}

func (d Difference) String() string { return fmt.Sprintf("%s: %q and %q", d.Field, d.A, d.B) }

// SameRun lists the fields in which a and b, the manifests of two logs
// (shards of a run, say), differ as runs: run ID, eval, seed, epochs,
// versions and dataset. Nil means they are one run. The shard, the
// creation time and the proctor version may differ. A dataset hash not
// yet computed (a shard stopped before its end), or computed by an older
// proctor, matches any.
func SameRun(a, b *Manifest) []Difference {
	var d []Difference
	add := func(field, x, y string) {
		if x != y {
			d = append(d, Difference{field, x, y})
		}
	}
	add("run ID", a.RunID, b.RunID)
	add("eval", a.Eval, b.Eval)
	add("seed", a.Seed, b.Seed)
	add("epochs", fmt.Sprint(a.Epochs), fmt.Sprint(b.Epochs))
	add("harness version", a.Versions.Harness, b.Versions.Harness)
	add("judge version", a.Versions.Judge, b.Versions.Judge)
	add("sandbox version", a.Versions.Sandbox, b.Versions.Sandbox)
	add("dataset samples", fmt.Sprint(a.Dataset.Samples), fmt.Sprint(b.Dataset.Samples))
	if a.Dataset.Comparable(b.Dataset) {
		add("dataset hash", a.Dataset.Hash, b.Dataset.Hash)
	}
	if a.Resources != nil && b.Resources != nil {
		add("sandbox resources", ResourcesString(a.Resources), ResourcesString(b.Resources))
	}
	return d
}

// Identity hashes the IDs and input JSON of n samples: id and input are
// called with each index in 0..n-1. It is the [IdentitySum] of the samples:
// the same samples in any order have the same identity.
func Identity(n int, id func(int) string, input func(int) []byte) DatasetIdentity {
	var sum IdentitySum
	var scratch []byte
	for i := range n {
		scratch = sum.Add(id(i), input(i), scratch)
	}
	return sum.Identity(n)
}

// IdentitySum adds up a dataset's identity one sample at a time, in any
// order and in parts: it is the sum, modulo 2^128, of a SHA-256 of each
// sample's length-prefixed ID and input JSON. So a run's workers hash the
// inputs they encode anyway for their records, each sample once, instead
// of the run encoding every input a second time. The zero value is the
// sum of no samples.
type IdentitySum struct{ lo, hi uint64 }

// Add adds the sample with this ID and input JSON. scratch is a buffer Add
// may use; it returns it for the next call.
func (s *IdentitySum) Add(id string, input, scratch []byte) []byte {
	b := binary.LittleEndian.AppendUint64(scratch[:0], uint64(len(id)))
	b = append(b, id...)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(input)))
	b = append(b, input...)
	h := sha256.Sum256(b)
	s.Merge(IdentitySum{binary.LittleEndian.Uint64(h[:8]), binary.LittleEndian.Uint64(h[8:16])})
	return b
}

// Merge adds the samples summed in t.
func (s *IdentitySum) Merge(t IdentitySum) {
	var carry uint64
	s.lo, carry = bits.Add64(s.lo, t.lo, 0)
	s.hi, _ = bits.Add64(s.hi, t.hi, carry)
}

// Identity is the identity of the n samples summed.
func (s IdentitySum) Identity(n int) DatasetIdentity {
	b := []byte("proctor dataset identity 2\x00")
	b = binary.LittleEndian.AppendUint64(b, s.lo)
	b = binary.LittleEndian.AppendUint64(b, s.hi)
	h := sha256.Sum256(b)
	return DatasetIdentity{Samples: n, Hash: sumScheme + hex.EncodeToString(h[:])}
}

// Version is the version of the proctor module linked into the running
// program, from its build information; empty when unknown.
func Version() string {
	const mod = "github.com/proctor-evals/proctor"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	if bi.Main.Path == mod {
		return bi.Main.Version
	}
	if i := slices.IndexFunc(bi.Deps, func(m *debug.Module) bool { return m.Path == mod }); i >= 0 {
		return bi.Deps[i].Version
	}
	return ""
}

// RunID derives a run ID from what the run is: its eval name, epochs,
// seed, component versions and dataset identity (m.RunID, CreatedAt,
// Shard and Proctor play no part). It is what the shards of one run share
// without talking to each other: each computes the same ID from the same
// eval, seed and dataset. The form is readable, "<eval>-<12 hex digits>",
// the eval name reduced to letters, digits, '.', '_' and '-' (at most 40
// of them).
//
// Two runs of the same eval, seed and dataset get the same ID: that is
// the point for shards, and a reason to give a fresh run its own ID (or
// seed) when it must not be confused with an earlier one.
func RunID(m *Manifest) string {
	h := sha256.New()
	var lenbuf [8]byte
	put := func(s string) {
		binary.LittleEndian.PutUint64(lenbuf[:], uint64(len(s)))
		h.Write(lenbuf[:])
		h.Write([]byte(s))
	}
	put("proctor run id v1")
	put(m.Eval)
	put(fmt.Sprint(m.Epochs))
	put(m.Seed)
	put(m.Versions.Harness)
	put(m.Versions.Judge)
	put(m.Versions.Sandbox)
	put(fmt.Sprint(m.Dataset.Samples))
	put(m.Dataset.Hash)
	return readable(m.Eval) + "-" + hex.EncodeToString(h.Sum(nil))[:12]
}

// readable keeps the characters of name that read well in a file name or
// a label, one '-' for each run of others.
func readable(name string) string {
	var b strings.Builder
	dash := false
	for _, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		switch {
		case ok:
			b.WriteRune(c)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 40 {
			break
		}
	}
	s := strings.TrimRight(b.String(), "-")
	if s == "" {
		return "run"
	}
	return s
}

// compact is raw JSON without insignificant space (Write indents it).
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// Episode is b's per-episode caps, zero for a nil b: what decides whether
// an episode ended at a cap runs again on resume.
func (b *Budget) Episode() Budget {
	if b == nil {
		return Budget{}
	}
	return Budget{EpisodeCostUSD: b.EpisodeCostUSD, EpisodeTokens: b.EpisodeTokens}
}
