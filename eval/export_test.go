package eval

import "github.com/proctor-evals/proctor/internal/distrib"

// ProgressOf is the progress of a Recording from distrib.Open, which the
// cluster never asks for (its Config.OnProgress is given it).
func ProgressOf(r distrib.Recording) Progress { return r.(*recording).Progress() }
