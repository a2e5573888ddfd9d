package gateway_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/proctor-evals/proctor/gateway"
)

// Env gives a sandbox the variables its agent's SDK reads; the token stands
// in for the provider's key.
func ExampleEnv() {
	env := gateway.Env("http://172.17.0.1:8080/", "proctor-gw-TOKEN")
	for _, k := range slices.Sorted(maps.Keys(env)) {
		fmt.Printf("%s=%s\n", k, strings.ReplaceAll(env[k], "proctor-gw-TOKEN", "<token>"))
	}
	// Output:
	// ANTHROPIC_API_KEY=<token>
	// ANTHROPIC_BASE_URL=http://172.17.0.1:8080
	// OPENAI_API_KEY=<token>
	// OPENAI_BASE_URL=http://172.17.0.1:8080/v1
}
