// Command testagent is a real agent for the gateway's tests: it speaks the
// providers' wire formats through their official Go SDKs (openai-go for
// Chat Completions and Responses, anthropic-sdk-go for Messages), reading
// its base URL and key from the environment as any agent CLI does, streaming
// or not, multi-turn with a tool it runs (list_files, over its workspace).
// It can also look for a byte string in its environment, its workspace and
// every /proc/*/environ and /proc/*/cmdline it can read: the test that the
// provider's key never reaches the sandbox.
//
// It is a module of its own so that the SDKs and their dependencies stay
// out of proctor's go.mod; the tests build it with go build.
//
// Output: one JSON object per conversation on stdout, then a summary; an
// API error ends it with exit status 3 after printing the error.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/openai/openai-go/v3"
)

// conversation is one agent loop: the model's calls and the tool runs
// until the model answers with text.
type conversation struct {
	Calls     int    `json:"calls"`
	ToolCalls int    `json:"tool_calls"`
	Text      string `json:"text"`
}

type summary struct {
	Conversations int      `json:"conversations"`
	Calls         int      `json:"calls"`
	Error         string   `json:"error,omitempty"`
	Found         []string `json:"found,omitempty"`    // where -search's string was found
	Searched      int      `json:"searched,omitempty"` // files read by -search
	Env           []string `json:"env,omitempty"`      // -dump-env
}

// maxTurns bounds one conversation's model calls.
const maxTurns = 8

func main() {
	api := flag.String("api", "chat", "chat, responses or messages")
	stream := flag.Bool("stream", false, "stream the answers")
	model := flag.String("model", "gpt-4o-mini", "the model to ask")
	n := flag.Int("conversations", 1, "conversations to hold; 0: until an API error")
	search := flag.Bool("search", false, "read a string from stdin and look for it in the environment, the workspace and /proc instead of talking (stdin, so that it is not in this process's own command line)")
	dumpEnv := flag.Bool("dump-env", false, "print the environment in the summary")
	flag.Parse()

	out := json.NewEncoder(os.Stdout)
	var sum summary
	if *dumpEnv {
		sum.Env = os.Environ()
	}
	if *search {
		s, err := io.ReadAll(os.Stdin)
		if err != nil || len(s) == 0 {
			fmt.Fprintln(os.Stderr, "testagent: -search reads a non-empty string from stdin")
			os.Exit(2)
		}
		sum.Found, sum.Searched = find(s)
		out.Encode(sum)
		return
	}
	ctx := context.Background()
	var talk func(context.Context, bool, string) (conversation, error)
	switch *api {
	case "chat":
		talk = chat
	case "responses":
		talk = respond
	case "messages":
		talk = messages
	default:
		fmt.Fprintln(os.Stderr, "testagent: -api must be chat, responses or messages")
		os.Exit(2)
	}
	for i := 0; *n == 0 || i < *n; i++ {
		c, err := talk(ctx, *stream, *model)
		sum.Calls += c.Calls
		if err != nil {
			sum.Error = describe(err)
			out.Encode(sum)
			os.Exit(3)
		}
		sum.Conversations++
		out.Encode(c)
	}
	out.Encode(sum)
}

// describe is an API error as an agent CLI shows it: the status and the
// provider's message (openai-go's Error() gives only the status).
func describe(err error) string {
	if e, ok := errors.AsType[*openai.Error](err); ok {
		return fmt.Sprintf("%s: %s: %s", e.Error(), e.Code, e.Message)
	}
	return err.Error()
}

const prompt = "List the files of the workspace, then say which one is the largest."

// listFiles is the agent's tool: the names in a directory of the workspace.
func listFiles(arguments string) string {
	var args struct {
		Path string `json:"path"`
	}
	json.Unmarshal([]byte(arguments), &args)
	if args.Path == "" {
		args.Path = "."
	}
	entries, err := os.ReadDir(args.Path)
	if err != nil {
		return "error: " + err.Error()
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join(names, "\n")
}

var toolSchema = map[string]any{
	"type":       "object",
	"properties": map[string]any{"path": map[string]any{"type": "string", "description": "a directory, relative to the workspace"}},
}

// find looks for s in the environment, the working directory's files and
// every readable /proc/*/environ and /proc/*/cmdline.
func find(s []byte) (found []string, searched int) {
	for _, kv := range os.Environ() {
		if bytes.Contains([]byte(kv), s) {
			name, _, _ := strings.Cut(kv, "=")
			found = append(found, "env:"+name)
		}
	}
	look := func(path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			return
		}
		searched++
		if bytes.Contains(b, s) {
			found = append(found, path)
		}
	}
	filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			look(path)
		}
		return nil
	})
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if p.Name()[0] < '0' || p.Name()[0] > '9' {
			continue
		}
		look("/proc/" + p.Name() + "/environ")
		look("/proc/" + p.Name() + "/cmdline")
	}
	return found, searched
}
