package eval

// The run manifest lives in package eval/manifest, which the command line
// imports without the engine; these names keep eval's API as it was.

import "github.com/proctor-evals/proctor/eval/manifest"

// Versions name the versions of an eval's components. Results recorded
// under other versions are stale: a run does not resume a log written
// under other versions unless Config.AllowChanged is set. See
// [manifest.Versions].
type Versions = manifest.Versions

// Manifest is what a run is: stored as JSON beside its log
// (run.jsonl → run.manifest.json). See [manifest.Manifest].
type Manifest = manifest.Manifest

// DatasetIdentity identifies a dataset by content.
type DatasetIdentity = manifest.DatasetIdentity

// ManifestMismatchError reports a resume against a log of another run
// shape: another eval, other component versions, another seed.
type ManifestMismatchError = manifest.MismatchError

// ManifestPath is where the manifest of the run logged at log is kept.
func ManifestPath(log string) string { return manifest.Path(log) }

// ReadManifest reads the manifest of the run logged at log. A log written
// before manifests existed has none: the error satisfies
// errors.Is(err, fs.ErrNotExist).
func ReadManifest(log string) (*Manifest, error) { return manifest.Read(log) }

const manifestSchema = manifest.Schema

func writeManifest(log string, m *Manifest) error { return manifest.Write(log, m) }

func proctorVersion() string { return manifest.Version() }
