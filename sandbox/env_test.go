package sandbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/sandboxtest"
)

// TestSetEnvReachesEveryCommandOverItsOwn: the engine gives an episode's
// sandbox the gateway's variables with SetEnv; every command gets them,
// over Spec.Env and its own Cmd.Env, until they are cleared.
func TestSetEnvReachesEveryCommandOverItsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb, err := sandbox.Open(ctx, (&sandboxtest.Fake{}).Provider(), sandbox.Spec{Env: map[string]string{"OPENAI_API_KEY": "from-spec", "KEEP": "spec"}})
	require.NoError(t, err)
	defer sb.Close()
	env := func(cmdEnv map[string]string) string {
		res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"env"}, Env: cmdEnv})
		require.NoError(t, err)
		return string(res.Stdout)
	}
	sb.SetEnv(map[string]string{"OPENAI_API_KEY": "token", "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"})
	require.Equal(t, "KEEP=spec\nOPENAI_API_KEY=token\nOPENAI_BASE_URL=http://127.0.0.1:1/v1\n", env(nil))
	require.Equal(t, "KEEP=spec\nMINE=1\nOPENAI_API_KEY=token\nOPENAI_BASE_URL=http://127.0.0.1:1/v1\n",
		env(map[string]string{"OPENAI_API_KEY": "sk-real", "MINE": "1"}), "a command's own key does not override the gateway's")
	sb.SetEnv(nil)
	require.Equal(t, "KEEP=spec\nOPENAI_API_KEY=from-spec\n", env(nil))
}

// TestServeGatewayNeedsADriverThatServesOne: a driver without
// driver.GatewayServer is an error wrapping errors.ErrUnsupported.
func TestServeGatewayNeedsADriverThatServesOne(t *testing.T) {
	t.Parallel()
	_, _, err := (&sandboxtest.Fake{}).Provider().ServeGateway(nil)
	require.ErrorIs(t, err, errors.ErrUnsupported)
}
