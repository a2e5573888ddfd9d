// Package duckdbcheck checks, against a real DuckDB, that what proctor
// writes loads where users query it: the JSONL log through read_json_auto,
// the Parquet sink's files with their logical types (JSON, MAP, TIMESTAMP
// WITH TIME ZONE, UBIGINT).
//
// It is a module of its own so that no user of proctor ever links DuckDB
// (github.com/duckdb/duckdb-go/v2 needs cgo and a 40 MB static library).
// CI runs it: (cd internal/duckdbcheck && go test ./...).
package duckdbcheck
