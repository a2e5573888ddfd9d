package parquetdataset_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/proctor-evals/proctor/dataset"
	"github.com/proctor-evals/proctor/dataset/parquetdataset"
)

// A Parquet file as published (here, a GSM8K-like file with no ID column)
// loads with a mapping: the row number is the ID.
func ExampleDataset() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "test-00000-of-00001.parquet")
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "question", Type: arrow.BinaryTypes.String},
		{Name: "answer", Type: arrow.BinaryTypes.String},
	}, nil)
	rec, _, _ := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(`[
		{"question": "Natalia sold 48 clips in April and half as many in May. How many in all?", "answer": "72"},
		{"question": "Weng earns $12 an hour. How much for 50 minutes?", "answer": "10"}]`))
	f, _ := os.Create(path)
	pqarrow.WriteTable(array.NewTableFromRecords(sc, []arrow.RecordBatch{rec}), f, 1024, nil, pqarrow.DefaultWriterProps())
	f.Close()

	type Problem struct {
		Question string `json:"question"`
		Answer   string `json:"answer"`
	}
	d := parquetdataset.Dataset[Problem]{Path: path, Mapping: dataset.Mapping{Input: []string{"question", "answer"}}}
	for s, err := range d.Samples(context.Background()) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: %.30s… = %s\n", s.ID, s.Input.Question, s.Input.Answer)
	}
	// Output:
	// 1: Natalia sold 48 clips in April… = 72
	// 2: Weng earns $12 an hour. How mu… = 10
}
