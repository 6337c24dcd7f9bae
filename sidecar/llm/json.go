package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/sashabaranov/go-openai/jsonschema"

	"github.com/mneme-memory/mneme/sidecar/clip"
	"github.com/mneme-memory/mneme/sidecar/usage"
)

// ErrInvalidOutput is wrapped by every error about what the model returned:
// not JSON, not matching the schema, or rejected by the type's Validate.
// Retrying the HTTP call would not fix it, so JSON does not; the job that
// asked fails its attempt and is retried by the job runner.
var ErrInvalidOutput = errors.New("invalid LLM output")

// Validator is implemented by output types with rules a JSON schema cannot
// say (ranges, cross-field constraints).
type Validator interface{ Validate() error }

var schemas sync.Map // reflect.Type -> *jsonschema.Definition

func schemaFor(t reflect.Type) (*jsonschema.Definition, error) {
	if s, ok := schemas.Load(t); ok {
		return s.(*jsonschema.Definition), nil
	}
	s, err := jsonschema.GenerateSchemaForType(reflect.New(t).Elem().Interface())
	if err != nil {
		return nil, err
	}
	schemas.Store(t, s)
	return s, nil
}

// JSON asks the model for a JSON object of out's type (out must be a
// non-nil pointer to a struct): the request carries a strict json_schema
// response format generated from the type, named name. The answer is
// checked against the schema, decoded with unknown fields rejected, and
// validated by out's Validate method if it has one; only then is it
// stored into out. On any error out is unchanged.
func (c *Client) JSON(ctx context.Context, system, user, name string, out any) error {
	rv := reflect.ValueOf(out)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("llm %s: out must be a non-nil pointer, got %T", name, out)
	}
	t := rv.Elem().Type()
	schema, err := schemaFor(t)
	if err != nil {
		return fmt.Errorf("llm %s: schema for %s: %w", name, t, err)
	}
	req := openai.ChatCompletionRequest{
		Model: c.model,
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: system},
			{Role: openai.ChatMessageRoleUser, Content: user},
		},
		ResponseFormat: &openai.ChatCompletionResponseFormat{
			Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{
				Name:   name,
				Schema: schema,
				Strict: true,
			},
		},
	}
	var (
		content  string
		tokens   = usage.Tokens{PromptChars: len(system) + len(user)}
		attempts int
	)
	start := time.Now()
	err = Retry(ctx, "chat", c.attempts, c.timeout, c.policy, c.observe, func(ctx context.Context) error {
		attempts++
		resp, err := c.api.CreateChatCompletion(ctx, req)
		if err != nil {
			return err
		}
		u := resp.Usage
		tokens.Reported = u.PromptTokens != 0 || u.CompletionTokens != 0 || u.TotalTokens != 0
		tokens.Prompt, tokens.Completion = int64(u.PromptTokens), int64(u.CompletionTokens)
		if len(resp.Choices) == 0 {
			return fmt.Errorf("%w: no choices in the response", ErrInvalidOutput)
		}
		content = resp.Choices[0].Message.Content
		tokens.CompletionChars = len(content)
		return nil
	})
	v := reflect.New(t)
	if err == nil {
		err = decode(*schema, []byte(content), v.Interface())
	}
	call := usage.Call{Call: usage.CallChat, Purpose: name, Model: c.model, Endpoint: c.endpoint,
		Latency: time.Since(start), Retries: attempts - 1,
		Outcome: usage.Outcome(err, TimedOut(err), ctx.Err() != nil, errors.Is(err, ErrInvalidOutput))}
	call.Settle(tokens)
	c.record.Record(ctx, call)
	if err != nil {
		return fmt.Errorf("llm %s (model %s): %w", name, c.model, err)
	}
	rv.Elem().Set(v.Elem())
	return nil
}

// decode checks content against schema and decodes it into v (a fresh
// pointer), then runs v's Validate.
func decode(schema jsonschema.Definition, content []byte, v any) error {
	var data any
	if err := json.Unmarshal(content, &data); err != nil {
		return fmt.Errorf("%w: not JSON: %v (content %q)", ErrInvalidOutput, err, clip.String(string(content), 200))
	}
	if !jsonschema.Validate(schema, data) {
		return fmt.Errorf("%w: does not match the JSON schema (content %q)", ErrInvalidOutput, clip.String(string(content), 200))
	}
	// The schema check ignores additionalProperties; strict decoding does not.
	dec := json.NewDecoder(bytes.NewReader(content))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v (content %q)", ErrInvalidOutput, err, clip.String(string(content), 200))
	}
	if val, ok := v.(Validator); ok {
		if err := val.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidOutput, err)
		}
	}
	return nil
}
