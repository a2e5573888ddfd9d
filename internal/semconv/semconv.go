// Package semconv names the OpenTelemetry attributes, events and values
// proctor's telemetry uses, pinned to one version of the semantic
// conventions ([SpecVersion]).
//
// The GenAI conventions moved to their own repository
// (open-telemetry/semantic-conventions-genai), and the Go semconv packages
// from v1.42.0 no longer carry them; importing an older semconv package
// for a dozen names would link thousands of others. So the few names
// proctor writes are here, checked against the v1.41.0 registry (the
// last release of the main repository with the GenAI attributes, and the
// gen_ai.evaluation.result event of the GenAI repository's events.yaml).
// Attributes under "proctor." are proctor's own.
package semconv

import "go.opentelemetry.io/otel/attribute"

// SpecVersion is the semantic conventions release the names are from.
const SpecVersion = "1.41.0"

// SchemaURL is the schema of [SpecVersion], for tracers and loggers.
const SchemaURL = "https://opentelemetry.io/schemas/" + SpecVersion

// GenAI client spans (gen-ai-spans.md): one span per model call, named
// "{gen_ai.operation.name} {gen_ai.request.model}", of kind client.
const (
	GenAIOperationName         attribute.Key = "gen_ai.operation.name"
	GenAIProviderName          attribute.Key = "gen_ai.provider.name"
	GenAIRequestModel          attribute.Key = "gen_ai.request.model"
	GenAIRequestMaxTokens      attribute.Key = "gen_ai.request.max_tokens"
	GenAIRequestTemperature    attribute.Key = "gen_ai.request.temperature"
	GenAIResponseModel         attribute.Key = "gen_ai.response.model"
	GenAIResponseFinishReasons attribute.Key = "gen_ai.response.finish_reasons"
	GenAIUsageInputTokens      attribute.Key = "gen_ai.usage.input_tokens"
	GenAIUsageOutputTokens     attribute.Key = "gen_ai.usage.output_tokens"
	GenAIEvaluationName        attribute.Key = "gen_ai.evaluation.name"
	GenAIEvaluationScoreValue  attribute.Key = "gen_ai.evaluation.score.value"
	GenAIEvaluationScoreLabel  attribute.Key = "gen_ai.evaluation.score.label"
	GenAIEvaluationExplanation attribute.Key = "gen_ai.evaluation.explanation"
	ServerAddress              attribute.Key = "server.address"
	ServerPort                 attribute.Key = "server.port"
	ErrorType                  attribute.Key = "error.type"
	ProcessCommand             attribute.Key = "process.command"
	ProcessExitCode            attribute.Key = "process.exit.code"
	ServiceName                attribute.Key = "service.name"
)

// Values of gen_ai.operation.name and gen_ai.provider.name.
const (
	GenAIOperationChat     = "chat"
	GenAIProviderOpenAI    = "openai"
	GenAIProviderAnthropic = "anthropic"
)

// EventGenAIEvaluationResult is the event a judge's verdict is emitted as,
// through the Logs API, with the gen_ai.evaluation.* attributes.
const EventGenAIEvaluationResult = "gen_ai.evaluation.result"

// ErrorTypeOther is error.type's fallback value.
const ErrorTypeOther = "_OTHER"

// proctor's own attributes: an episode's identity and outcome.
const (
	RunID     attribute.Key = "proctor.run_id"
	Eval      attribute.Key = "proctor.eval"
	SampleID  attribute.Key = "proctor.sample_id"
	Epoch     attribute.Key = "proctor.epoch"
	Attempt   attribute.Key = "proctor.attempt"
	Seed      attribute.Key = "proctor.seed" // decimal: a uint64 does not fit an int64 attribute
	Status    attribute.Key = "proctor.status"
	ErrorKind attribute.Key = "proctor.error_kind"
	Score     attribute.Key = "proctor.score"
	TimedOut  attribute.Key = "proctor.timed_out"
)
