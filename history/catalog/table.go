package catalog

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/proctor-evals/proctor/internal/atomicfile"
)

// A catalog table is flat: one leaf column per field, of one of these
// kinds. Text and integers are required (the zero value is a value);
// numbers and times are null when undefined (NaN, ±Inf, the zero time),
// so that SQL's avg and min skip them.
type kind int

const (
	kindString kind = iota
	kindInt
	kindFloat // DOUBLE, null for NaN and ±Inf
	kindTime  // TIMESTAMP(MICROS, UTC), null for the zero time
)

// value is one cell, by kind.
type value struct {
	s string
	i int64
	f float64
	t time.Time
}

// field is a column of a table of T: its name, kind, and how a row's
// cell is read and set.
type field[T any] struct {
	name string
	kind kind
	get  func(*T) value
	set  func(*T, value)
}

func str[T any](name string, p func(*T) *string) field[T] {
	return field[T]{name, kindString, func(r *T) value { return value{s: *p(r)} }, func(r *T, v value) { *p(r) = v.s }}
}

func integer[T any, I int | int64](name string, p func(*T) *I) field[T] {
	return field[T]{name, kindInt, func(r *T) value { return value{i: int64(*p(r))} }, func(r *T, v value) { *p(r) = I(v.i) }}
}

func float[T any](name string, p func(*T) *float64) field[T] {
	return field[T]{name, kindFloat, func(r *T) value { return value{f: *p(r)} }, func(r *T, v value) { *p(r) = v.f }}
}

func timestamp[T any](name string, p func(*T) *time.Time) field[T] {
	return field[T]{name, kindTime, func(r *T) value { return value{t: *p(r)} }, func(r *T, v value) { *p(r) = v.t }}
}

func (k kind) node(name string) (schema.Node, error) {
	switch k {
	case kindString:
		return schema.NewPrimitiveNodeLogical(name, pq.Repetitions.Required, schema.StringLogicalType{}, pq.Types.ByteArray, -1, -1)
	case kindInt:
		return schema.NewPrimitiveNode(name, pq.Repetitions.Required, pq.Types.Int64, -1, -1)
	case kindFloat:
		return schema.NewPrimitiveNode(name, pq.Repetitions.Optional, pq.Types.Double, -1, -1)
	default:
		return schema.NewPrimitiveNodeLogical(name, pq.Repetitions.Optional, schema.NewTimestampLogicalTypeForce(true, schema.TimeUnitMicros), pq.Types.Int64, -1, -1)
	}
}

// metadataKey marks a catalog file; its value is the catalog's Schema.
const metadataKey = "proctor.catalog"

// writeTable writes rows as the Parquet file at path, atomically: a
// reader or a crash sees the old file or the new one.
func writeTable[T any](path string, fields []field[T], rows []T) error {
	var nodes schema.FieldList
	for _, f := range fields {
		n, err := f.kind.node(f.name)
		if err != nil {
			return fmt.Errorf("catalog: column %s: %w", f.name, err)
		}
		nodes = append(nodes, n)
	}
	root, err := schema.NewGroupNode("schema", pq.Repetitions.Required, nodes, -1)
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	props := pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Zstd), pq.WithDictionaryDefault(false),
		pq.WithCreatedBy("proctor (github.com/proctor-evals/proctor) over arrow-go"))
	meta := metadata.NewKeyValueMetadata()
	meta.Append(metadataKey, strconv.Itoa(Schema))
	err = atomicfile.Write(path, 0o644, func(w *bufio.Writer) (err error) {
		defer func() {
			if p := recover(); p != nil { // arrow-go reports some write failures so
				err = fmt.Errorf("%v", p)
			}
		}()
		fw, err := file.NewParquetWriterWithError(w, root, file.WithWriterProps(props), file.WithWriteMetadata(meta))
		if err != nil {
			return err
		}
		rgw, err := fw.AppendRowGroupChecked()
		if err != nil {
			return err
		}
		for _, f := range fields {
			cw, err := rgw.NextColumn()
			if err != nil {
				return err
			}
			if err := writeColumn(cw, f, rows); err != nil {
				return fmt.Errorf("column %s: %w", f.name, err)
			}
		}
		if err := rgw.Close(); err != nil {
			return err
		}
		return fw.Close()
	})
	if err != nil {
		return fmt.Errorf("catalog: %s: %w", path, err)
	}
	return nil
}

func writeColumn[T any](cw file.ColumnChunkWriter, f field[T], rows []T) error {
	def := make([]int16, 0, len(rows))
	var err error
	switch cw := cw.(type) {
	case *file.ByteArrayColumnChunkWriter:
		vals := make([]pq.ByteArray, len(rows))
		for i := range rows {
			vals[i] = pq.ByteArray(f.get(&rows[i]).s)
		}
		_, err = cw.WriteBatch(vals, nil, nil)
	case *file.Int64ColumnChunkWriter:
		vals := make([]int64, 0, len(rows))
		for i := range rows {
			v := f.get(&rows[i])
			switch {
			case f.kind == kindInt:
				vals = append(vals, v.i)
			case v.t.IsZero():
				def = append(def, 0)
			default:
				vals, def = append(vals, v.t.UnixMicro()), append(def, 1)
			}
		}
		if f.kind == kindInt {
			def = nil
		}
		_, err = cw.WriteBatch(vals, def, nil)
	case *file.Float64ColumnChunkWriter:
		vals := make([]float64, 0, len(rows))
		for i := range rows {
			if v := f.get(&rows[i]).f; math.IsNaN(v) || math.IsInf(v, 0) {
				def = append(def, 0)
			} else {
				vals, def = append(vals, v), append(def, 1)
			}
		}
		_, err = cw.WriteBatch(vals, def, nil)
	default:
		err = fmt.Errorf("unexpected column writer %T", cw)
	}
	if cerr := cw.Close(); err == nil {
		err = cerr
	}
	return err
}

// errNotCatalog marks a file that is not a catalog's, and errOtherVersion
// a catalog file of another Schema (built again from the logs).
var (
	errNotCatalog   = errors.New("not a proctor catalog file")
	errOtherVersion = errors.New("a catalog of another schema")
)

// readTable reads the rows of the table at path. A column the file lacks
// leaves its field zero; a column the fields do not name is ignored.
func readTable[T any](path string, fields []field[T]) (rows []T, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	defer func() {
		if p := recover(); p != nil { // arrow-go panics on some corrupt files
			rows, err = nil, fmt.Errorf("corrupt file: %v", p)
		}
		if err != nil {
			err = fmt.Errorf("catalog: %s: %w", path, err)
		}
	}()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		return nil, err
	}
	switch v := pf.MetaData().KeyValueMetadata().FindValue(metadataKey); {
	case v == nil:
		return nil, errNotCatalog
	case *v != strconv.Itoa(Schema):
		return nil, errOtherVersion
	}
	sch := pf.MetaData().Schema
	for g := range pf.NumRowGroups() {
		rg := pf.RowGroup(g)
		n := int(rg.NumRows())
		start := len(rows)
		rows = append(rows, make([]T, n)...)
		for _, fd := range fields {
			col := sch.ColumnIndexByName(fd.name)
			if col < 0 {
				continue
			}
			cr, err := rg.Column(col)
			if err != nil {
				return nil, err
			}
			if err := readColumn(cr, fd, rows[start:]); err != nil {
				return nil, fmt.Errorf("column %s: %w", fd.name, err)
			}
		}
	}
	return rows, nil
}

func readColumn[T any](cr file.ColumnChunkReader, f field[T], rows []T) error {
	n := int64(len(rows))
	def := make([]int16, n)
	// each fills vals and returns how many rows it read; def[i] is 0 for
	// a null (optional columns only: required columns have no levels).
	var read int64
	var err error
	present := func(i int) bool { return cr.Descriptor().MaxDefinitionLevel() == 0 || def[i] > 0 }
	switch cr := cr.(type) {
	case *file.ByteArrayColumnChunkReader:
		vals := make([]pq.ByteArray, n)
		read, err = readAll(n, func(off int64, voff int) (int64, int, error) { return cr.ReadBatch(n-off, vals[voff:], def[off:], nil) })
		if err == nil && f.kind == kindString {
			for i := range rows {
				f.set(&rows[i], value{s: string(vals[i])})
			}
		}
	case *file.Int64ColumnChunkReader:
		vals := make([]int64, n)
		read, err = readAll(n, func(off int64, voff int) (int64, int, error) { return cr.ReadBatch(n-off, vals[voff:], def[off:], nil) })
		k := 0
		for i := range rows {
			switch {
			case err != nil:
			case f.kind == kindInt && present(i):
				f.set(&rows[i], value{i: vals[k]})
				k++
			case f.kind == kindTime && present(i):
				f.set(&rows[i], value{t: time.UnixMicro(vals[k]).UTC()})
				k++
			}
		}
	case *file.Float64ColumnChunkReader:
		vals := make([]float64, n)
		read, err = readAll(n, func(off int64, voff int) (int64, int, error) { return cr.ReadBatch(n-off, vals[voff:], def[off:], nil) })
		k := 0
		for i := range rows {
			if err != nil || f.kind != kindFloat {
				break
			}
			v := math.NaN()
			if present(i) {
				v = vals[k]
				k++
			}
			f.set(&rows[i], value{f: v})
		}
	default:
		return fmt.Errorf("unexpected column type %T", cr)
	}
	if err == nil && read != n {
		err = fmt.Errorf("%d of %d rows", read, n)
	}
	return err
}

// readAll calls batch until it has read n rows (levels), each call given
// the rows and the values read so far: the values of an optional column
// are packed, nulls left out, so the two offsets differ. It returns the
// rows read.
func readAll(n int64, batch func(off int64, voff int) (int64, int, error)) (int64, error) {
	var rows int64
	var vals int
	for rows < n {
		got, v, err := batch(rows, vals)
		if err != nil {
			return rows, err
		}
		if got == 0 {
			break
		}
		rows, vals = rows+got, vals+v
	}
	return rows, nil
}
