package eval

// The run manifest lives in package eval/manifest, which the command line
// imports without the engine. Versions stays here by name because users
// write it in their Eval literals.

import "github.com/proctor-evals/proctor/eval/manifest"

// Versions name the versions of an eval's components. Results recorded
// under other versions are stale: a run does not resume a log written
// under other versions unless Config.AllowChanged is set. See
// [manifest.Versions].
type Versions = manifest.Versions

const manifestSchema = manifest.Schema

func writeManifest(log string, m *manifest.Manifest) error { return manifest.Write(log, m) }

func proctorVersion() string { return manifest.Version() }
