package gatewaytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/proctor-evals/proctor/usage"
)

// created is the fixed creation time answers carry.
const created = 1741569952

// answer is one answer, rendered in its API's wire format.
type answer struct {
	api, model, id string
	chunks         []string // a text answer's deltas
	tool, args     string   // a tool call's name and arguments
	usage          usage.Usage
	usageSent      bool   // set once the usage went on the wire
	streamError    string // a Messages stream's error event, after its first delta
}

func (p *Provider) answer(rq Request) *answer {
	a := &answer{api: rq.API, model: rq.Model, id: fmt.Sprintf("%d", rq.Turn+1)}
	if tool, pending := toolTurn(rq.API, rq.Body); pending {
		a.tool = tool
		a.args = p.ToolArguments
		if a.args == "" {
			a.args = "{}"
		}
	} else {
		n, text := p.Chunks, p.Text
		if n <= 0 {
			n = 3
		}
		if text == "" {
			text = "ok "
		}
		for range n {
			a.chunks = append(a.chunks, text)
		}
	}
	if p.Usage != nil {
		a.usage = p.Usage(rq)
	} else {
		a.usage = usage.Usage{InputTokens: int64(len(rq.Body)) / 4, OutputTokens: 5 * int64(max(len(a.chunks), 2))}
	}
	a.usage.Model, a.usage.CostUSD = rq.Model, 0
	return a
}

// toolTurn returns the first tool the request declares and whether the
// answer should call it: tools are declared and the conversation does not
// end in a tool's result.
func toolTurn(api string, body []byte) (string, bool) {
	var r struct {
		Tools []struct {
			Name     string `json:"name"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Input json.RawMessage `json:"input"`
	}
	if json.Unmarshal(body, &r) != nil || len(r.Tools) == 0 {
		return "", false
	}
	name := r.Tools[0].Name
	if name == "" {
		name = r.Tools[0].Function.Name
	}
	var resulted bool
	switch api {
	case "chat.completions":
		resulted = len(r.Messages) > 0 && r.Messages[len(r.Messages)-1].Role == "tool"
	case "messages":
		if n := len(r.Messages); n > 0 {
			var blocks []struct {
				Type string `json:"type"`
			}
			json.Unmarshal(r.Messages[n-1].Content, &blocks)
			for _, b := range blocks {
				resulted = resulted || b.Type == "tool_result"
			}
		}
	case "responses":
		var items []struct {
			Type string `json:"type"`
		}
		json.Unmarshal(r.Input, &items)
		resulted = len(items) > 0 && items[len(items)-1].Type == "function_call_output"
	}
	return name, !resulted
}

func (a *answer) text() string { return strings.Join(a.chunks, "") }

// The usage objects, as each API writes them.
func (a *answer) chatUsage() string {
	u := a.usage
	return fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":%d,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`,
		u.InputTokens, u.OutputTokens, u.Tokens(), u.CacheReadTokens, u.ReasoningTokens)
}

func (a *answer) responsesUsage() string {
	u := a.usage
	return fmt.Sprintf(`{"input_tokens":%d,"input_tokens_details":{"cached_tokens":%d},"output_tokens":%d,"output_tokens_details":{"reasoning_tokens":%d},"total_tokens":%d}`,
		u.InputTokens, u.CacheReadTokens, u.OutputTokens, u.ReasoningTokens, u.Tokens())
}

// messagesUsage is Anthropic's usage, whose input_tokens is the uncached
// rest of the input.
func (a *answer) messagesUsage(output int64) string {
	u := a.usage
	return fmt.Sprintf(`{"input_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":%d,"service_tier":"standard"}`,
		u.InputTokens-u.CacheReadTokens-u.CacheWriteTokens, u.CacheWriteTokens, u.CacheReadTokens, output)
}

// json is the non-streamed answer.
func (a *answer) json() []byte {
	a.usageSent = true
	switch a.api {
	case "chat.completions":
		msg := fmt.Sprintf(`{"role":"assistant","content":%s,"refusal":null,"annotations":[]}`, q(a.text()))
		finish := "stop"
		if a.tool != "" {
			msg = fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_%s","type":"function","function":{"name":%s,"arguments":%s}}],"refusal":null,"annotations":[]}`, a.id, q(a.tool), q(a.args))
			finish = "tool_calls"
		}
		return fmt.Appendf(nil, `{"id":"chatcmpl-%s","object":"chat.completion","created":%d,"model":%s,"choices":[{"index":0,"message":%s,"logprobs":null,"finish_reason":%q}],"usage":%s,"service_tier":"default","system_fingerprint":"fp_gatewaytest"}`,
			a.id, created, q(a.model), msg, finish, a.chatUsage())
	case "responses":
		return fmt.Appendf(nil, `{"id":"resp_%s","object":"response","created_at":%d,"status":"completed","error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"model":%s,"output":[%s],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":true,"temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled","usage":%s,"user":null,"metadata":{}}`,
			a.id, created, q(a.model), a.responsesItem(true), a.responsesUsage())
	default:
		content := fmt.Sprintf(`{"type":"text","text":%s}`, q(a.text()))
		stop := "end_turn"
		if a.tool != "" {
			content = fmt.Sprintf(`{"type":"tool_use","id":"toolu_%s","name":%s,"input":%s}`, a.id, q(a.tool), a.args)
			stop = "tool_use"
		}
		return fmt.Appendf(nil, `{"id":"msg_%s","type":"message","role":"assistant","model":%s,"content":[%s],"stop_reason":%q,"stop_sequence":null,"usage":%s}`,
			a.id, q(a.model), content, stop, a.messagesUsage(a.usage.OutputTokens))
	}
}

// responsesItem is the Responses API's output item, done or just added.
func (a *answer) responsesItem(done bool) string {
	if a.tool != "" {
		args, status := a.args, "completed"
		if !done {
			args, status = "", "in_progress"
		}
		return fmt.Sprintf(`{"id":"fc_%s","type":"function_call","status":%q,"arguments":%s,"call_id":"call_%s","name":%s}`, a.id, status, q(args), a.id, q(a.tool))
	}
	if !done {
		return fmt.Sprintf(`{"id":"msg_%s","type":"message","status":"in_progress","content":[],"role":"assistant"}`, a.id)
	}
	return fmt.Sprintf(`{"id":"msg_%s","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":%s}],"role":"assistant"}`, a.id, q(a.text()))
}

// stream writes the streamed answer, flushing each event; false when the
// client went away first.
func (a *answer) stream(w http.ResponseWriter, r *http.Request, delay time.Duration, withUsage bool) bool {
	f := w.(http.Flusher)
	ok := true
	send := func(event, data string) {
		if !ok {
			return
		}
		if event != "" {
			_, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data)
			ok = err == nil
		} else {
			_, err := fmt.Fprintf(w, "data: %s\n\n", data)
			ok = err == nil
		}
		f.Flush()
		ok = ok && r.Context().Err() == nil
	}
	wait := func() {
		if delay > 0 && ok {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				ok = false
			}
		}
	}
	switch a.api {
	case "chat.completions":
		a.streamChat(send, wait, withUsage)
	case "responses":
		a.streamResponses(send, wait)
	default:
		a.streamMessages(send, wait)
	}
	return ok
}

func (a *answer) streamChat(send func(event, data string), wait func(), withUsage bool) {
	head := fmt.Sprintf(`{"id":"chatcmpl-%s","object":"chat.completion.chunk","created":%d,"model":%s,"service_tier":"default","system_fingerprint":"fp_gatewaytest","choices":`, a.id, created, q(a.model))
	tail := `}`
	if withUsage {
		tail = `,"usage":null}`
	}
	chunk := func(delta, finish string) {
		send("", head+fmt.Sprintf(`[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}]`, delta, finish)+tail)
	}
	finish := `"stop"`
	if a.tool != "" {
		chunk(fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_%s","type":"function","function":{"name":%s,"arguments":""}}],"refusal":null}`, a.id, q(a.tool)), "null")
		for _, part := range split(a.args) {
			wait()
			chunk(fmt.Sprintf(`{"tool_calls":[{"index":0,"function":{"arguments":%s}}]}`, q(part)), "null")
		}
		finish = `"tool_calls"`
	} else {
		chunk(`{"role":"assistant","content":"","refusal":null}`, "null")
		for _, c := range a.chunks {
			wait()
			chunk(fmt.Sprintf(`{"content":%s}`, q(c)), "null")
		}
	}
	chunk(`{}`, finish)
	if withUsage {
		send("", head+`[],"usage":`+a.chatUsage()+`}`)
		a.usageSent = true
	}
	send("", "[DONE]")
}

func (a *answer) streamResponses(send func(event, data string), wait func()) {
	seq := 0
	ev := func(typ, rest string) {
		send(typ, fmt.Sprintf(`{"type":%q,"sequence_number":%d,%s}`, typ, seq, rest))
		seq++
	}
	resp := func(status, output, usage string) string {
		return fmt.Sprintf(`"response":{"id":"resp_%s","object":"response","created_at":%d,"status":%q,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"model":%s,"output":[%s],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":true,"temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled","usage":%s,"user":null,"metadata":{}}`,
			a.id, created, status, q(a.model), output, usage)
	}
	ev("response.created", resp("in_progress", "", "null"))
	ev("response.in_progress", resp("in_progress", "", "null"))
	ev("response.output_item.added", `"output_index":0,"item":`+a.responsesItem(false))
	if a.tool != "" {
		for _, part := range split(a.args) {
			wait()
			ev("response.function_call_arguments.delta", fmt.Sprintf(`"item_id":"fc_%s","output_index":0,"delta":%s`, a.id, q(part)))
		}
		ev("response.function_call_arguments.done", fmt.Sprintf(`"item_id":"fc_%s","output_index":0,"arguments":%s`, a.id, q(a.args)))
	} else {
		item := fmt.Sprintf(`"item_id":"msg_%s","output_index":0,"content_index":0`, a.id)
		ev("response.content_part.added", item+`,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}`)
		for _, c := range a.chunks {
			wait()
			ev("response.output_text.delta", item+`,"delta":`+q(c)+`,"logprobs":[]`)
		}
		ev("response.output_text.done", item+`,"text":`+q(a.text())+`,"logprobs":[]`)
		ev("response.content_part.done", item+`,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":`+q(a.text())+`}`)
	}
	ev("response.output_item.done", `"output_index":0,"item":`+a.responsesItem(true))
	ev("response.completed", resp("completed", a.responsesItem(true), a.responsesUsage()))
	a.usageSent = true
}

func (a *answer) streamMessages(send func(event, data string), wait func()) {
	send("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_%s","type":"message","role":"assistant","model":%s,"content":[],"stop_reason":null,"stop_sequence":null,"usage":%s}}`,
		a.id, q(a.model), a.messagesUsage(1)))
	stop := "end_turn"
	if a.tool != "" {
		send("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_%s","name":%s,"input":{}}}`, a.id, q(a.tool)))
		send("ping", `{"type": "ping"}`)
		for _, part := range split(a.args) {
			wait()
			send("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":`+q(part)+`}}`)
			if a.streamError != "" {
				send("error", `{"type":"error","error":{"type":`+q(a.streamError)+`,"message":"Overloaded"}}`)
				return
			}
		}
		stop = "tool_use"
	} else {
		send("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		send("ping", `{"type": "ping"}`)
		for _, c := range a.chunks {
			wait()
			send("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+q(c)+`}}`)
			if a.streamError != "" {
				send("error", `{"type":"error","error":{"type":`+q(a.streamError)+`,"message":"Overloaded"}}`)
				return
			}
		}
	}
	send("content_block_stop", `{"type":"content_block_stop","index":0}`)
	send("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}}`, stop, a.usage.OutputTokens))
	a.usageSent = true
	send("message_stop", `{"type":"message_stop"}`)
}

// split cuts s in two, as providers stream a tool's arguments in parts.
func split(s string) []string {
	if len(s) < 2 {
		return []string{s}
	}
	return []string{s[:len(s)/2], s[len(s)/2:]}
}
