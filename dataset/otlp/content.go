package otlp

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrNoContent is returned by [Content] for a span whose input was not
// recorded.
var ErrNoContent = errors.New("otlp: no recorded input on the span")

// Content reads a span's input and output the ways GenAI instrumentations
// record them, trying each in turn:
//
//  1. the attributes gen_ai.input.messages and gen_ai.output.messages
//     (the current GenAI semantic conventions), as structured values or
//     as JSON strings; for execute_tool spans, gen_ai.tool.call.arguments
//     and gen_ai.tool.call.result;
//  2. the span events gen_ai.content.prompt and gen_ai.content.completion
//     with the attributes gen_ai.prompt and gen_ai.completion (the
//     conventions before 1.28);
//  3. the attributes gen_ai.prompt and gen_ai.completion, or flattened as
//     gen_ai.prompt.0.role, gen_ai.prompt.0.content… (OpenLLMetry), read
//     back into an array of objects.
//
// A string that holds JSON is taken as that JSON, any other string as a
// JSON string. The input is required: without one, Content returns
// ErrNoContent. The output may be missing (an operation that failed): it
// is then nil.
func Content(s *Span) (input, output json.RawMessage, err error) {
	get := func(attr, event, eventAttr, flat string) (json.RawMessage, error) {
		if v, ok := s.Attrs[attr]; ok {
			return rawJSON(v)
		}
		for _, e := range s.Events {
			if e.Name == event {
				if v, ok := e.Attrs[eventAttr]; ok {
					return rawJSON(v)
				}
			}
		}
		if v, ok := s.Attrs[flat]; ok {
			return rawJSON(v)
		}
		if v := unflatten(s.Attrs, flat+"."); v != nil {
			return json.Marshal(v)
		}
		return nil, nil
	}
	if input, err = get("gen_ai.input.messages", "gen_ai.content.prompt", "gen_ai.prompt", "gen_ai.prompt"); err != nil {
		return nil, nil, fmt.Errorf("input: %w", err)
	}
	if output, err = get("gen_ai.output.messages", "gen_ai.content.completion", "gen_ai.completion", "gen_ai.completion"); err != nil {
		return nil, nil, fmt.Errorf("output: %w", err)
	}
	if input == nil {
		if v, ok := s.Attrs["gen_ai.tool.call.arguments"]; ok {
			if input, err = rawJSON(v); err != nil {
				return nil, nil, fmt.Errorf("input: %w", err)
			}
			if r, ok := s.Attrs["gen_ai.tool.call.result"]; ok && output == nil {
				if output, err = rawJSON(r); err != nil {
					return nil, nil, fmt.Errorf("output: %w", err)
				}
			}
		}
	}
	if input == nil {
		return nil, nil, ErrNoContent
	}
	return input, output, nil
}

// isContent reports whether the attribute key holds content that Content
// reads (large, and already in the case's input or output).
func isContent(key string) bool {
	switch key {
	case "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
		"gen_ai.prompt", "gen_ai.completion", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result":
		return true
	}
	return strings.HasPrefix(key, "gen_ai.prompt.") || strings.HasPrefix(key, "gen_ai.completion.")
}

// rawJSON renders an attribute value as JSON: a string holding a JSON
// object or array as that JSON, any other value as its JSON encoding.
func rawJSON(v any) (json.RawMessage, error) {
	if s, ok := v.(string); ok {
		t := strings.TrimSpace(s)
		if (strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[")) && json.Valid([]byte(t)) {
			return json.RawMessage(t), nil
		}
	}
	return json.Marshal(jsonSafe(v))
}

// unflatten reads attributes PREFIX.N.FIELD back into an array of objects,
// element N holding FIELD (which may itself contain dots), in the order of
// N (below 10,000); nil if there are none.
func unflatten(attrs map[string]any, prefix string) []map[string]any {
	var elems map[int]map[string]any
	for k, v := range attrs {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		idx, field, ok := strings.Cut(rest, ".")
		n, err := strconv.Atoi(idx)
		if !ok || err != nil || n < 0 || n >= 10000 || field == "" {
			continue
		}
		if elems == nil {
			elems = make(map[int]map[string]any)
		}
		if elems[n] == nil {
			elems[n] = make(map[string]any)
		}
		elems[n][field] = jsonSafe(v)
	}
	if elems == nil {
		return nil
	}
	idx := make([]int, 0, len(elems))
	for n := range elems {
		idx = append(idx, n)
	}
	slices.Sort(idx)
	out := make([]map[string]any, 0, len(idx))
	for _, n := range idx {
		out = append(out, elems[n]) // gaps are closed up: a dropped message does not become a null
	}
	return out
}
