package parquet

import (
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/proctor-evals/proctor/sink"
)

// MetadataKey is the file-level key-value metadata key that marks a Parquet
// file as holding proctor records; its value is the record schema version
// ([sink.SchemaVersion], "1").
const MetadataKey = "proctor.schema"

// The columns, in the order of [sink.Record]'s fields. Their names are the
// record's JSON names.
const (
	colSchema = iota
	colRunID
	colEval
	colSampleID
	colEpoch
	colAttempt
	colStatus
	colScore
	colScores
	colWeight
	colReason
	colError
	colErrorKind
	colInput
	colOutput
	colTags
	colStartedAt
	colDurationMS
	colInputTokens
	colOutputTokens
	colCostUSD
	colSeed
	colTrace
	colParentRunID
	numCols
)

// jsonMetadata marks a string column whose values are JSON documents.
var jsonMetadata = arrow.NewMetadata([]string{"proctor.content"}, []string{"json"})

// schema is the Arrow schema of record schema v1. Scalar columns are
// required (the zero value is a value); input and output are null when the
// record has none, scores and tags when the map is empty.
var schema = arrow.NewSchema([]arrow.Field{
	colSchema:       {Name: "schema", Type: arrow.PrimitiveTypes.Int64},
	colRunID:        {Name: "run_id", Type: arrow.BinaryTypes.String},
	colEval:         {Name: "eval", Type: arrow.BinaryTypes.String},
	colSampleID:     {Name: "sample_id", Type: arrow.BinaryTypes.String},
	colEpoch:        {Name: "epoch", Type: arrow.PrimitiveTypes.Int64},
	colAttempt:      {Name: "attempt", Type: arrow.PrimitiveTypes.Int64},
	colStatus:       {Name: "status", Type: arrow.BinaryTypes.String},
	colScore:        {Name: "score", Type: arrow.PrimitiveTypes.Float64},
	colScores:       {Name: "scores", Type: scoresType, Nullable: true},
	colWeight:       {Name: "weight", Type: arrow.PrimitiveTypes.Float64},
	colReason:       {Name: "reason", Type: arrow.BinaryTypes.String},
	colError:        {Name: "error", Type: arrow.BinaryTypes.String},
	colErrorKind:    {Name: "error_kind", Type: arrow.BinaryTypes.String},
	colInput:        {Name: "input", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: jsonMetadata},
	colOutput:       {Name: "output", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: jsonMetadata},
	colTags:         {Name: "tags", Type: tagsType, Nullable: true},
	colStartedAt:    {Name: "started_at", Type: arrow.FixedWidthTypes.Timestamp_us},
	colDurationMS:   {Name: "duration_ms", Type: arrow.PrimitiveTypes.Float64},
	colInputTokens:  {Name: "input_tokens", Type: arrow.PrimitiveTypes.Int64},
	colOutputTokens: {Name: "output_tokens", Type: arrow.PrimitiveTypes.Int64},
	colCostUSD:      {Name: "cost_usd", Type: arrow.PrimitiveTypes.Float64},
	colSeed:         {Name: "seed", Type: arrow.PrimitiveTypes.Uint64},
	colTrace:        {Name: "trace", Type: arrow.BinaryTypes.String},
	colParentRunID:  {Name: "parent_run_id", Type: arrow.BinaryTypes.String},
}, metadataPtr(arrow.NewMetadata([]string{MetadataKey}, []string{strconv.Itoa(sink.SchemaVersion)})))

var (
	scoresType = mapOf(arrow.PrimitiveTypes.Float64)
	tagsType   = mapOf(arrow.BinaryTypes.String)
)

// mapOf is map<string, item> with sorted keys (the writer sorts them) and
// non-null items.
func mapOf(item arrow.DataType) *arrow.MapType {
	t := arrow.MapOfFields(
		arrow.Field{Name: "key", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "value", Type: item},
	)
	t.KeysSorted = true
	return t
}

func metadataPtr(m arrow.Metadata) *arrow.Metadata { return &m }

// Every column is plain-encoded (pq.WithDictionaryDefault(false)): zstd
// compresses a repeated value (status, error_kind, run_id…) about as well as
// a dictionary would (BenchmarkMemory's files are no bigger: 11.64 bytes a
// record, against 11.65 with status, error_kind and parent_run_id
// dictionary-encoded), while arrow-go's dictionary encoder hashes every value
// and allocates for it (boxing it in an interface), which cost about a sixth
// of the writer's throughput.

// noStatsColumns are the columns whose min/max statistics cost time and
// serve no query: long, unique text, and the keys and values of the maps
// (a filter on a map element cannot use them).
var noStatsColumns = []string{"reason", "error", "input", "output", "trace", "scores.key_value.key", "tags.key_value.key", "tags.key_value.value"}
