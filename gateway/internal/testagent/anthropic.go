package main

import (
	"context"
	"errors"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

var (
	errNoChoice     = errors.New("testagent: the answer has no message")
	errTooManyTurns = errors.New("testagent: no text answer within the turn limit")
)

// messages holds one conversation over Anthropic Messages.
func messages(ctx context.Context, stream bool, model string) (conversation, error) {
	client := anthropic.NewClient() // ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY
	var c conversation
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
		Tools: []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
			Properties: toolSchema["properties"],
		}, "list_files")},
	}
	for range maxTurns {
		c.Calls++
		var msg anthropic.Message
		if stream {
			s := client.Messages.NewStreaming(ctx, params)
			for s.Next() {
				if err := msg.Accumulate(s.Current()); err != nil {
					return c, err
				}
			}
			if err := s.Err(); err != nil {
				return c, err
			}
		} else {
			resp, err := client.Messages.New(ctx, params)
			if err != nil {
				return c, err
			}
			msg = *resp
		}
		var results []anthropic.ContentBlockParamUnion
		var text string
		for _, b := range msg.Content {
			switch b.Type {
			case "tool_use":
				c.ToolCalls++
				results = append(results, anthropic.NewToolResultBlock(b.ID, listFiles(string(b.Input)), false))
			case "text":
				text += b.Text
			}
		}
		if len(results) == 0 {
			c.Text = text
			return c, nil
		}
		params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewUserMessage(results...))
	}
	return c, errTooManyTurns
}
