package gateway_test

import (
	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/gateway"
)

// A *Gateway is what eval.Config.Models takes.
var _ eval.Models = (*gateway.Gateway)(nil)
