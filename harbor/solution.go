package harbor

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/proctor-evals/proctor/harness"
	"github.com/proctor-evals/proctor/sandbox"
)

// Solution is the harness that runs a task's reference solution, its
// oracle: it copies solution/ to /solution in the episode's sandbox and
// runs /solution/solve.sh (under bash when the image has it, else sh) in
// the task's working directory, with [solution] env, under [agent]
// timeout_sec. Run as the agent with [Verifier] as the judge, every task
// must pass: one that fails has a broken solution or verifier, one that
// errors a broken environment or no reward. A task without
// solution/solve.sh is an error.
type Solution struct{}

// Run implements harness.Harness.
func (Solution) Run(ctx context.Context, ep *harness.Episode[Task]) (harness.CommandOutput, error) {
	t := ep.Sample.Input
	if ep.Sandbox == nil {
		return harness.CommandOutput{}, errors.New("harbor: the solution needs the episode's sandbox (set the eval's Sandbox to harbor.Spec)")
	}
	if err := upload(ctx, ep, filepath.Join(t.Dir, "solution"), SolutionDir); err != nil {
		return harness.CommandOutput{}, err
	}
	script := fmt.Sprintf(`test -f %[1]s/solve.sh || { echo "no solution/solve.sh" >&2; exit 127; }; if command -v bash >/dev/null 2>&1; then exec bash %[1]s/solve.sh; else exec sh %[1]s/solve.sh; fi`, SolutionDir)
	res, err := run(ctx, ep, "solve.sh", sandbox.Cmd{Args: []string{"sh", "-c", script}, Env: t.Config.Solution.Env, Timeout: t.AgentTimeout()})
	out := harness.CommandOutput{Stdout: string(res.Stdout), Stderr: string(res.Stderr), ExitCode: res.ExitCode, TimedOut: res.TimedOut, Truncated: res.Truncated}
	return out, err
}
