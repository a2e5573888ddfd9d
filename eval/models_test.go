package eval_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/eval"
	"github.com/proctor-evals/proctor/gateway"
	"github.com/proctor-evals/proctor/sandbox/sandboxtest"
)

// TestModelsNeedASandboxThatServesThem: Config.Models without a sandbox,
// or over a driver that cannot serve a gateway, cannot start: a
// *ConfigError, before anything runs.
func TestModelsNeedASandboxThatServesThem(t *testing.T) {
	t.Parallel()
	gw, err := gateway.New(gateway.Options{})
	require.NoError(t, err)
	for _, cfg := range []eval.Config{
		{Models: gw, Quiet: true},
		{Models: gw, Quiet: true, Sandbox: (&sandboxtest.Fake{}).Provider()},
	} {
		_, err := spender(map[string]int64{"a": 1}, nil, nil, nil).Run(context.Background(), cfg)
		var ce *eval.ConfigError
		require.True(t, errors.As(err, &ce), "%v", err)
		require.Contains(t, err.Error(), "Config.Models")
	}
}
