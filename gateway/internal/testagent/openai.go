package main

import (
	"context"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// chat holds one conversation over Chat Completions.
func chat(ctx context.Context, stream bool, model string) (conversation, error) {
	client := openai.NewClient() // OPENAI_BASE_URL, OPENAI_API_KEY
	var c conversation
	params := openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "list_files", Description: openai.String("List a directory of the workspace"), Parameters: toolSchema,
		})},
	}
	for range maxTurns {
		c.Calls++
		var msg openai.ChatCompletionMessage
		if stream {
			s := client.Chat.Completions.NewStreaming(ctx, params)
			var acc openai.ChatCompletionAccumulator
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			if err := s.Err(); err != nil {
				return c, err
			}
			if len(acc.Choices) == 0 {
				return c, errNoChoice
			}
			msg = acc.Choices[0].Message
		} else {
			resp, err := client.Chat.Completions.New(ctx, params)
			if err != nil {
				return c, err
			}
			if len(resp.Choices) == 0 {
				return c, errNoChoice
			}
			msg = resp.Choices[0].Message
		}
		if len(msg.ToolCalls) == 0 {
			c.Text = msg.Content
			return c, nil
		}
		params.Messages = append(params.Messages, msg.ToParam())
		for _, tc := range msg.ToolCalls {
			c.ToolCalls++
			params.Messages = append(params.Messages, openai.ToolMessage(listFiles(tc.Function.Arguments), tc.ID))
		}
	}
	return c, errTooManyTurns
}

// respond holds one conversation over the Responses API, each turn
// continuing the previous response.
func respond(ctx context.Context, stream bool, model string) (conversation, error) {
	client := openai.NewClient()
	var c conversation
	params := responses.ResponseNewParams{
		Model: model,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)},
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
			Name: "list_files", Description: openai.String("List a directory of the workspace"), Parameters: toolSchema,
		}}},
	}
	for range maxTurns {
		c.Calls++
		var resp *responses.Response
		if stream {
			s := client.Responses.NewStreaming(ctx, params)
			for s.Next() {
				switch ev := s.Current(); ev.Type {
				case "response.completed":
					r := ev.AsResponseCompleted().Response
					resp = &r
				case "error":
					s.Close()
					return c, fmt.Errorf("testagent: error event: %s: %s", ev.Code, ev.Message)
				}
			}
			if err := s.Err(); err != nil {
				return c, err
			}
			if resp == nil {
				return c, errNoChoice
			}
		} else {
			var err error
			if resp, err = client.Responses.New(ctx, params); err != nil {
				return c, err
			}
		}
		var outputs []responses.ResponseInputItemUnionParam
		for _, item := range resp.Output {
			if item.Type == "function_call" {
				fc := item.AsFunctionCall()
				c.ToolCalls++
				outputs = append(outputs, responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
					CallID: openai.String(fc.CallID),
					Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(listFiles(fc.Arguments))},
				}})
			}
		}
		if len(outputs) == 0 {
			c.Text = resp.OutputText()
			return c, nil
		}
		params.PreviousResponseID = openai.String(resp.ID)
		params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: outputs}
	}
	return c, errTooManyTurns
}
