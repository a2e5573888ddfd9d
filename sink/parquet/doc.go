// Package parquet is the columnar [sink.Sink]: it writes records as Parquet
// files (Apache Arrow Go, zstd by default) for DuckDB, pandas, polars and
// Spark, and reads them back.
//
// A [Writer] made by [New] writes a directory of part files,
// part-00000.parquet, part-00001.parquet…, rolling to a new file every
// [WithFileRows] rows; each is written under a .tmp name and renamed once
// whole. [Records] reads a directory (or one file) back as records; [Files]
// lists a directory's finished files.
//
// The columns are the record's fields, typed, under their JSON names; see
// [Writer] for the mapping and for what does not round-trip exactly
// (timestamps are kept in microseconds, invalid UTF-8 is replaced). The
// JSONL log (sink/jsonl) stays the source of truth; Parquet is for analysis.
//
//	SELECT status, count(*) FROM 'results/*.parquet' GROUP BY status;
//	SELECT tags['difficulty'] AS d, avg(score) FROM 'results/*.parquet' GROUP BY d;
//	SELECT output::JSON->>'answer' FROM 'results/*.parquet';
package parquet
