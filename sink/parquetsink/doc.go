// Package parquetsink is the columnar [sink.Sink]: it writes records as Parquet
// files (Apache Arrow Go's parquet/file, zstd by default) for DuckDB,
// pandas, polars and Spark, and reads them back.
//
// A [Writer] made by [New] writes a directory of part files,
// part-00000.parquet, part-00001.parquet…, rolling to a new file every
// [Options.FileRows] rows; each is written under a .tmp name and renamed
// once whole. A resumed run writes into the same directory, after the files
// there. [Records] reads a directory (or one file) back as records; [Files]
// lists a directory's finished files.
//
// The columns are the record's fields under their JSON names, with Parquet
// logical types (STRING, JSON for input and output, MAP for scores and
// tags, TIMESTAMP for started_at, unsigned INT64 for seed); see [Writer]
// for the mapping and for what does not round-trip exactly (timestamps are
// kept in microseconds, invalid UTF-8 is replaced). The JSONL log
// (sink/jsonl) stays the source of truth; Parquet is for analysis.
//
//	SELECT status, count(*) FROM 'results/*.parquet' GROUP BY status;
//	SELECT tags['difficulty'] AS d, avg(score) FROM 'results/*.parquet' GROUP BY d;
//	SELECT output->>'answer' FROM 'results/*.parquet';
//
// The package writes through parquet/file's column writers, not pqarrow:
// pqarrow links arrow/flight, and with it gRPC, into every program that
// imports it (cmd/proctor linked 64 gRPC packages for it).
package parquetsink
