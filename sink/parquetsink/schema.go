package parquetsink

import (
	"errors"
	"fmt"

	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// MetadataKey is the file-level key-value metadata key that marks a Parquet
// file as holding proctor records; its value is the record schema version
// ([sink.SchemaVersion], "1").
const MetadataKey = "proctor.schema"

// The leaf columns of the Parquet schema, in file order (the order of
// [sink.Record]'s fields; scores and tags hold two leaves each, key and
// value). Their names are the record's JSON names.
const (
	leafSchema = iota
	leafRunID
	leafEval
	leafVariant
	leafSampleID
	leafEpoch
	leafAttempt
	leafStatus
	leafScore
	leafScoreKey
	leafScoreValue
	leafWeight
	leafReason
	leafError
	leafErrorKind
	leafErrorSource
	leafJudgeStages
	leafInput
	leafOutput
	leafTagKey
	leafTagValue
	leafStartedAt
	leafDurationMS
	leafInputTokens
	leafOutputTokens
	leafCostUSD
	leafJudgeInputTokens
	leafJudgeOutputTokens
	leafJudgeCostUSD
	leafModel
	leafJudgeModel
	leafSimulatorInputTokens
	leafSimulatorOutputTokens
	leafSimulatorCostUSD
	leafSimulatorModel
	leafResources
	leafCallsReplayed
	leafReplayDivergedAt
	leafSeed
	leafTranscript
	leafParentRunID
	leafReusedFrom
	leafWorker
	leafTraceID
	leafSpanID
	numLeaves
)

// The writer's buffers: each leaf's values live in one slice of a
// row group, by physical type.
const (
	i64Schema = iota
	i64Epoch
	i64Attempt
	i64StartedAt
	i64InputTokens
	i64OutputTokens
	i64JudgeInputTokens
	i64JudgeOutputTokens
	i64SimulatorInputTokens
	i64SimulatorOutputTokens
	i64CallsReplayed
	i64ReplayDivergedAt
	i64Seed // uint64 bits
	numI64
)

const (
	f64Score = iota
	f64ScoreValue
	f64Weight
	f64DurationMS
	f64CostUSD
	f64JudgeCostUSD
	f64SimulatorCostUSD
	numF64
)

const (
	strRunID = iota
	strEval
	strVariant
	strSampleID
	strStatus
	strScoreKey
	strReason
	strError
	strErrorKind
	strErrorSource
	strJudgeStages
	strInput
	strOutput
	strTagKey
	strTagValue
	strModel
	strJudgeModel
	strSimulatorModel
	strResources
	strTranscript
	strParentRunID
	strReusedFrom
	strWorker
	strTraceID
	strSpanID
	numStr
)

// Which levels a leaf carries.
const (
	levelsNone = iota
	levelsInput
	levelsOutput
	levelsScores
	levelsTags
)

// leaf describes one leaf column: its dotted path, its physical type, the
// buffer holding its values and the levels it carries.
type leaf struct {
	path   string
	typ    pq.Type
	buf    int // index in the i64, f64 or str buffers, by typ
	levels int
}

var leaves = [numLeaves]leaf{
	leafSchema:                {"schema", pq.Types.Int64, i64Schema, levelsNone},
	leafRunID:                 {"run_id", pq.Types.ByteArray, strRunID, levelsNone},
	leafEval:                  {"eval", pq.Types.ByteArray, strEval, levelsNone},
	leafVariant:               {"variant", pq.Types.ByteArray, strVariant, levelsNone},
	leafSampleID:              {"sample_id", pq.Types.ByteArray, strSampleID, levelsNone},
	leafEpoch:                 {"epoch", pq.Types.Int64, i64Epoch, levelsNone},
	leafAttempt:               {"attempt", pq.Types.Int64, i64Attempt, levelsNone},
	leafStatus:                {"status", pq.Types.ByteArray, strStatus, levelsNone},
	leafScore:                 {"score", pq.Types.Double, f64Score, levelsNone},
	leafScoreKey:              {"scores.key_value.key", pq.Types.ByteArray, strScoreKey, levelsScores},
	leafScoreValue:            {"scores.key_value.value", pq.Types.Double, f64ScoreValue, levelsScores},
	leafWeight:                {"weight", pq.Types.Double, f64Weight, levelsNone},
	leafReason:                {"reason", pq.Types.ByteArray, strReason, levelsNone},
	leafError:                 {"error", pq.Types.ByteArray, strError, levelsNone},
	leafErrorKind:             {"error_kind", pq.Types.ByteArray, strErrorKind, levelsNone},
	leafErrorSource:           {"error_source", pq.Types.ByteArray, strErrorSource, levelsNone},
	leafJudgeStages:           {"judge_stages", pq.Types.ByteArray, strJudgeStages, levelsNone},
	leafInput:                 {"input", pq.Types.ByteArray, strInput, levelsInput},
	leafOutput:                {"output", pq.Types.ByteArray, strOutput, levelsOutput},
	leafTagKey:                {"tags.key_value.key", pq.Types.ByteArray, strTagKey, levelsTags},
	leafTagValue:              {"tags.key_value.value", pq.Types.ByteArray, strTagValue, levelsTags},
	leafStartedAt:             {"started_at", pq.Types.Int64, i64StartedAt, levelsNone},
	leafDurationMS:            {"duration_ms", pq.Types.Double, f64DurationMS, levelsNone},
	leafInputTokens:           {"input_tokens", pq.Types.Int64, i64InputTokens, levelsNone},
	leafOutputTokens:          {"output_tokens", pq.Types.Int64, i64OutputTokens, levelsNone},
	leafCostUSD:               {"cost_usd", pq.Types.Double, f64CostUSD, levelsNone},
	leafJudgeInputTokens:      {"judge_input_tokens", pq.Types.Int64, i64JudgeInputTokens, levelsNone},
	leafJudgeOutputTokens:     {"judge_output_tokens", pq.Types.Int64, i64JudgeOutputTokens, levelsNone},
	leafJudgeCostUSD:          {"judge_cost_usd", pq.Types.Double, f64JudgeCostUSD, levelsNone},
	leafModel:                 {"model", pq.Types.ByteArray, strModel, levelsNone},
	leafJudgeModel:            {"judge_model", pq.Types.ByteArray, strJudgeModel, levelsNone},
	leafSimulatorInputTokens:  {"simulator_input_tokens", pq.Types.Int64, i64SimulatorInputTokens, levelsNone},
	leafSimulatorOutputTokens: {"simulator_output_tokens", pq.Types.Int64, i64SimulatorOutputTokens, levelsNone},
	leafSimulatorCostUSD:      {"simulator_cost_usd", pq.Types.Double, f64SimulatorCostUSD, levelsNone},
	leafSimulatorModel:        {"simulator_model", pq.Types.ByteArray, strSimulatorModel, levelsNone},
	leafResources:             {"resources", pq.Types.ByteArray, strResources, levelsNone},
	leafCallsReplayed:         {"calls_replayed", pq.Types.Int64, i64CallsReplayed, levelsNone},
	leafReplayDivergedAt:      {"replay_diverged_at", pq.Types.Int64, i64ReplayDivergedAt, levelsNone},
	leafSeed:                  {"seed", pq.Types.Int64, i64Seed, levelsNone},
	leafTranscript:            {"trace", pq.Types.ByteArray, strTranscript, levelsNone},
	leafParentRunID:           {"parent_run_id", pq.Types.ByteArray, strParentRunID, levelsNone},
	leafReusedFrom:            {"reused_from", pq.Types.ByteArray, strReusedFrom, levelsNone},
	leafWorker:                {"worker", pq.Types.ByteArray, strWorker, levelsNone},
	leafTraceID:               {"trace_id", pq.Types.ByteArray, strTraceID, levelsNone},
	leafSpanID:                {"span_id", pq.Types.ByteArray, strSpanID, levelsNone},
}

// buildSchema returns the Parquet schema of record schema v1, with the logical
// types query engines map to their own: STRING for text, JSON for input
// and output, MAP for scores and tags, TIMESTAMP(MICROS, UTC) for
// started_at, INT(64, unsigned) for seed. Scalar columns are required (the
// zero value is a value); input and output are null when the record has
// none, scores and tags when the map is empty.
//
// It is built with arrow-go's parquet/schema and written with its
// parquet/file column writers rather than through pqarrow, which links
// arrow/flight and with it gRPC into every program that writes Parquet.
//
// Each file gets a tree of its own: arrow-go's schema nodes cache their
// column paths lazily, without a lock, so writers that share one tree race.
func buildSchema() *schema.GroupNode {
	req, opt := pq.Repetitions.Required, pq.Repetitions.Optional
	var errs []error
	prim := func(name string, rep pq.Repetition, lt schema.LogicalType, typ pq.Type) schema.Node {
		n, err := schema.NewPrimitiveNodeLogical(name, rep, lt, typ, -1, -1)
		errs = append(errs, err)
		return n
	}
	str := func(name string) schema.Node {
		return prim(name, req, schema.StringLogicalType{}, pq.Types.ByteArray)
	}
	i64 := func(name string) schema.Node { return schema.NewInt64Node(name, req, -1) }
	f64 := func(name string) schema.Node { return schema.NewFloat64Node(name, req, -1) }
	jsonCol := func(name string) schema.Node {
		return prim(name, opt, schema.JSONLogicalType{}, pq.Types.ByteArray)
	}
	mapCol := func(name string, value schema.Node) schema.Node {
		n, err := schema.MapOf(name, str("key"), value, opt, -1)
		errs = append(errs, err)
		return n
	}
	fields := schema.FieldList{
		i64("schema"),
		str("run_id"),
		str("eval"),
		str("variant"),
		str("sample_id"),
		i64("epoch"),
		i64("attempt"),
		str("status"),
		f64("score"),
		mapCol("scores", f64("value")),
		f64("weight"),
		str("reason"),
		str("error"),
		str("error_kind"),
		str("error_source"),
		str("judge_stages"),
		jsonCol("input"),
		jsonCol("output"),
		mapCol("tags", str("value")),
		prim("started_at", req, schema.NewTimestampLogicalTypeForce(true, schema.TimeUnitMicros), pq.Types.Int64),
		f64("duration_ms"),
		i64("input_tokens"),
		i64("output_tokens"),
		f64("cost_usd"),
		i64("judge_input_tokens"),
		i64("judge_output_tokens"),
		f64("judge_cost_usd"),
		str("model"),
		str("judge_model"),
		i64("simulator_input_tokens"),
		i64("simulator_output_tokens"),
		f64("simulator_cost_usd"),
		str("simulator_model"),
		str("resources"),
		i64("calls_replayed"),
		i64("replay_diverged_at"),
		prim("seed", req, schema.NewIntLogicalType(64, false), pq.Types.Int64),
		str("trace"),
		str("parent_run_id"),
		str("reused_from"),
		str("worker"),
		str("trace_id"),
		str("span_id"),
	}
	root, err := schema.NewGroupNode("schema", req, fields, -1)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		panic(fmt.Sprintf("parquet: record schema: %v", err))
	}
	return root
}

// Every column is plain-encoded (pq.WithDictionaryDefault(false)): zstd
// compresses a repeated value (status, error_kind, run_id…) about as well as
// a dictionary would (BenchmarkMemory's files are no bigger: 11.64 bytes a
// record, against 11.65 with status, error_kind and parent_run_id
// dictionary-encoded), while arrow-go's dictionary encoder hashes every value
// and allocates for it (boxing it in an interface), which cost about a sixth
// of the writer's throughput.

// noStatsColumns are the columns whose min/max statistics cost time and
// serve no query: long or unique text (trace and span IDs are random, so
// every row group's range spans them all), and the keys and values of the
// maps (a filter on a map element cannot use them). reused_from and worker
// keep theirs: few distinct values, which a filter may skip row groups by.
var noStatsColumns = []string{"reason", "error", "input", "output", "trace", "trace_id", "span_id", "scores.key_value.key", "tags.key_value.key", "tags.key_value.value"}
