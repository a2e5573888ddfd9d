package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/proctor-evals/proctor/internal/providerusage"
	"github.com/proctor-evals/proctor/usage"
)

// The metered APIs, as Call.API names them.
const (
	apiChat      = "chat.completions"
	apiResponses = "responses"
	apiMessages  = "messages"
)

// bytesPerToken is the estimate of a cut stream's tokens from its bytes:
// about four bytes a token in English text and code. It prices only what
// the provider never reported, and is flagged when used.
const bytesPerToken = 4

// request is what the gateway reads of an agent's request.
type request struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
}

var errNotObject = errors.New("the request body is not a JSON object")

// parseRequest reads the fields the gateway needs; an error for a body that
// is not a JSON object.
func parseRequest(body []byte) (request, error) {
	var r request
	if err := json.Unmarshal(body, &r); err != nil {
		return r, fmt.Errorf("the request body is not a JSON object: %w", err)
	}
	if b := bytes.TrimLeft(body, " \t\r\n"); len(b) == 0 || b[0] != '{' {
		return r, errNotObject // null, which json.Unmarshal takes for an empty struct
	}
	return r, nil
}

// maxTokensFields are the answer bounds an API reads, the one set when the
// agent set none first.
var maxTokensFields = map[string][]string{
	apiChat:      {"max_completion_tokens", "max_tokens"},
	apiResponses: {"max_output_tokens"},
	apiMessages:  {"max_tokens"},
}

// rewrite returns body with its answer bound clamped to limit (when limit
// > 0 and the bound is absent or larger) and, for a Chat Completions
// stream, stream_options.include_usage set; body itself when neither
// applies. Only those fields change; the others are kept as sent.
func rewrite(api string, body []byte, stream bool, limit int64) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	if m == nil { // null: FuzzRewrite found the panic of setting a field in it
		return nil, errNotObject
	}
	changed := false
	if limit > 0 {
		fields := maxTokensFields[api]
		set := ""
		for _, f := range fields {
			if raw, ok := m[f]; ok && string(raw) != "null" {
				var v int64
				if err := json.Unmarshal(raw, &v); err != nil {
					return nil, fmt.Errorf("%s is not an integer", f)
				}
				if v <= limit {
					set = "-" // within the limit already
					break
				}
				set = f
				break
			}
		}
		if set == "" && api != apiMessages { // Messages requires max_tokens: the provider says so
			set = fields[0]
		}
		if set != "" && set != "-" {
			m[set] = json.RawMessage(fmt.Sprint(limit))
			changed = true
			if api == apiMessages {
				if err := clampThinking(m, limit); err != nil {
					return nil, err
				}
			}
		}
	}
	if api == apiChat && stream {
		var so map[string]json.RawMessage
		if raw, ok := m["stream_options"]; ok && string(raw) != "null" {
			if err := json.Unmarshal(raw, &so); err != nil {
				return nil, errors.New("stream_options is not an object")
			}
		}
		if string(so["include_usage"]) != "true" {
			if so == nil {
				so = map[string]json.RawMessage{}
			}
			so["include_usage"] = json.RawMessage("true")
			b, _ := json.Marshal(so)
			m["stream_options"] = b
			changed = true
		}
	}
	if !changed {
		return body, nil
	}
	return json.Marshal(m)
}

// minThinkingBudget is the least thinking.budget_tokens the Messages API
// takes.
const minThinkingBudget = 1024

// errNoRoomToThink: a Messages request with extended thinking whose
// answer bound, clamped to what the episode has left, leaves no room for
// the least thinking budget the API takes.
var errNoRoomToThink = errors.New("the episode's budget leaves no room for extended thinking's least budget (1,024 tokens)")

// clampThinking keeps a Messages request with extended thinking valid
// once its max_tokens is clamped to limit: the API refuses a
// thinking.budget_tokens that is not below max_tokens, so it is clamped to
// limit − 1, or the call is refused (errNoRoomToThink) when that is below
// the least budget the API takes.
func clampThinking(m map[string]json.RawMessage, limit int64) error {
	raw, ok := m["thinking"]
	if !ok || string(raw) == "null" {
		return nil
	}
	var t map[string]json.RawMessage
	if err := json.Unmarshal(raw, &t); err != nil {
		return errors.New("thinking is not an object")
	}
	var kind string
	if err := json.Unmarshal(t["type"], &kind); err != nil || kind != "enabled" {
		return nil // disabled, or a kind without a budget: the provider judges it
	}
	var budget int64
	if err := json.Unmarshal(t["budget_tokens"], &budget); err != nil {
		return errors.New("thinking.budget_tokens is not an integer")
	}
	if budget < limit {
		return nil
	}
	if limit-1 < minThinkingBudget {
		return errNoRoomToThink
	}
	t["budget_tokens"] = json.RawMessage(fmt.Sprint(limit - 1))
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	m["thinking"] = b
	return nil
}

// counted is the meter of one response: the provider's usage as it
// arrives, and what was forwarded, to estimate a cut stream.
type counted struct {
	api   string
	model string // the model that answered, once the response names it
	usage usage.Usage
	// final is set once the provider's usage for the whole answer came;
	// inputKnown once its input tokens came (Anthropic's message_start).
	final, inputKnown bool
	// inputEstimate is the request's size in tokens; outBytes the answer
	// text, arguments and reasoning forwarded.
	inputEstimate int64
	outBytes      int64
	err           error // the first undecodable event or body
	// congested is set by a stream's error event of a rate or overload
	// type (Anthropic's mid-stream overloaded_error): congestion the
	// status, 200, could not tell.
	congested bool
}

// estimate is the usage so far: the provider's when final, else the
// provider's input if known and the forwarded bytes' estimate.
func (c *counted) estimate() usage.Usage {
	if c.final {
		return c.usage
	}
	u := c.usage
	if !c.inputKnown {
		u.InputTokens = c.inputEstimate
	}
	u.OutputTokens = max(u.OutputTokens, (c.outBytes+bytesPerToken-1)/bytesPerToken)
	return u
}

func (c *counted) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// Wire shapes of usage, as each API reports it: internal/providerusage's,
// which the judges' clients decode too.
type (
	chatUsage      = providerusage.Chat
	responsesUsage = providerusage.Responses
	messagesUsage  = providerusage.Messages
)

// check rejects counts no provider sends.
var check = providerusage.Check

// decodeJSON reads a whole (non-streamed) response body's model and usage.
func (c *counted) decodeJSON(body []byte) {
	var r struct {
		Model string          `json:"model"`
		Usage json.RawMessage `json:"usage"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		c.fail(fmt.Errorf("the provider's response is not JSON: %w", err))
		return
	}
	if r.Model != "" {
		c.model = r.Model
	}
	if len(r.Usage) == 0 || string(r.Usage) == "null" {
		c.fail(errors.New("the provider's response has no usage"))
		return
	}
	u, err := decodeUsage(c.api, r.Usage)
	if err != nil {
		c.fail(fmt.Errorf("the provider's usage: %w", err))
		return
	}
	c.usage, c.final, c.inputKnown = u, true, true
}

// decodeUsage decodes one usage object of api.
func decodeUsage(api string, raw []byte) (usage.Usage, error) {
	switch api {
	case apiChat:
		var u chatUsage
		if err := json.Unmarshal(raw, &u); err != nil {
			return usage.Usage{}, err
		}
		return u.Usage()
	case apiResponses:
		var u responsesUsage
		if err := json.Unmarshal(raw, &u); err != nil {
			return usage.Usage{}, err
		}
		return u.Usage()
	case apiMessages:
		var u messagesUsage
		if err := json.Unmarshal(raw, &u); err != nil {
			return usage.Usage{}, err
		}
		if u.InputTokens == nil {
			return usage.Usage{}, errors.New("no input_tokens")
		}
		out, _, err := u.Merge(usage.Usage{})
		return out, err
	}
	return usage.Usage{}, fmt.Errorf("no usage decoder for %q", api)
}

// event reads one server-sent event of a streamed response.
func (c *counted) event(name string, data []byte) {
	switch c.api {
	case apiChat:
		c.chatEvent(data)
	case apiResponses:
		c.responsesEvent(data)
	case apiMessages:
		c.messagesEvent(name, data)
	}
}

func (c *counted) chatEvent(data []byte) {
	if bytes.Equal(data, []byte("[DONE]")) {
		return
	}
	var ch struct {
		Model   string `json:"model"`
		Choices []struct {
			Delta struct {
				Content          string `json:"content"`
				Refusal          string `json:"refusal"`
				ReasoningContent string `json:"reasoning_content"` // compatible servers (vLLM, DeepSeek)
				ToolCalls        []struct {
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"delta"`
		} `json:"choices"`
		Usage *chatUsage `json:"usage"`
	}
	if err := json.Unmarshal(data, &ch); err != nil {
		c.fail(fmt.Errorf("a stream chunk is not JSON: %w", err))
		return
	}
	if ch.Model != "" {
		c.model = ch.Model
	}
	for _, cho := range ch.Choices {
		d := cho.Delta
		c.outBytes += int64(len(d.Content) + len(d.Refusal) + len(d.ReasoningContent))
		for _, tc := range d.ToolCalls {
			c.outBytes += int64(len(tc.Function.Name) + len(tc.Function.Arguments))
		}
	}
	if ch.Usage != nil {
		u, err := ch.Usage.Usage()
		if err != nil {
			c.fail(fmt.Errorf("the stream's usage: %w", err))
			return
		}
		c.usage, c.final, c.inputKnown = u, true, true
	}
}

func (c *counted) responsesEvent(data []byte) {
	var ev struct {
		Type     string `json:"type"`
		Delta    string `json:"delta"`
		Response *struct {
			Model string          `json:"model"`
			Usage *responsesUsage `json:"usage"`
		} `json:"response"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		c.fail(fmt.Errorf("a stream event is not JSON: %w", err))
		return
	}
	c.outBytes += int64(len(ev.Delta)) // text, arguments and reasoning deltas alike
	if ev.Response == nil {
		return
	}
	if ev.Response.Model != "" {
		c.model = ev.Response.Model
	}
	switch ev.Type {
	case "response.completed", "response.incomplete", "response.failed":
		if ev.Response.Usage == nil {
			return
		}
		u, err := ev.Response.Usage.Usage()
		if err != nil {
			c.fail(fmt.Errorf("the stream's usage: %w", err))
			return
		}
		c.usage, c.final, c.inputKnown = u, true, true
	}
}

func (c *counted) messagesEvent(name string, data []byte) {
	var ev struct {
		Type    string `json:"type"`
		Message *struct {
			Model string         `json:"model"`
			Usage *messagesUsage `json:"usage"`
		} `json:"message"`
		Delta struct {
			Text        string `json:"text"`
			PartialJSON string `json:"partial_json"`
			Thinking    string `json:"thinking"`
		} `json:"delta"`
		Usage *messagesUsage `json:"usage"`
		Error *struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		c.fail(fmt.Errorf("a stream event is not JSON: %w", err))
		return
	}
	if ev.Type == "" {
		ev.Type = name
	}
	var u *messagesUsage
	switch ev.Type {
	case "error":
		if ev.Error != nil {
			c.congested = c.congested || congestion(0, []byte(ev.Error.Type))
		}
	case "message_start":
		if ev.Message != nil {
			if ev.Message.Model != "" {
				c.model = ev.Message.Model
			}
			u = ev.Message.Usage
		}
	case "content_block_delta":
		c.outBytes += int64(len(ev.Delta.Text) + len(ev.Delta.PartialJSON) + len(ev.Delta.Thinking))
	case "message_delta":
		u = ev.Usage
		if u != nil {
			defer func() { c.final = c.err == nil && c.inputKnown }()
		}
	}
	if u == nil {
		return
	}
	merged, inputSeen, err := u.Merge(c.usage)
	if err != nil {
		c.fail(fmt.Errorf("the stream's usage: %w", err))
		return
	}
	c.usage = merged
	c.inputKnown = c.inputKnown || inputSeen
}
