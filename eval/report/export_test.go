package report

import "github.com/proctor-evals/proctor/internal/natural"

// NaturalCompare exposes the order of samples to the external tests.
var NaturalCompare = natural.Compare
