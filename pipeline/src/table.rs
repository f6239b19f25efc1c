//! Typed rows <-> Parquet. Only this module knows the on-disk column layout.
//!
//! Stages work with plain Rust structs (`#[derive(Serialize, Deserialize, Row)]`):
//! [`Row`] names the table and declares its columns, one per field. Scalars map to
//! Parquet columns of the same type; anything structured (tool arguments, execution
//! outputs) goes in a [`ColType::Json`] column as JSON text (key order preserved), so analysis tools
//! (polars, pandas, duckdb) can read every table without this crate.

use crate::digest::Digest;
use crate::error::{StoreError, StoreErrorKind};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray,
};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

/// The Parquet type of a column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColType {
    /// UTF-8 text.
    Str,
    /// 64-bit signed integer.
    I64,
    /// 64-bit float.
    F64,
    /// Boolean.
    Bool,
    /// Any serde value, stored as JSON text (object key order kept) in a UTF-8 column.
    Json,
}

impl ColType {
    fn arrow(self) -> DataType {
        match self {
            ColType::Str | ColType::Json => DataType::Utf8,
            ColType::I64 => DataType::Int64,
            ColType::F64 => DataType::Float64,
            ColType::Bool => DataType::Boolean,
        }
    }

    /// The type's name in schema docs and error messages, e.g. `int64`.
    pub fn name(self) -> &'static str {
        match self {
            ColType::Str => "string",
            ColType::I64 => "int64",
            ColType::F64 => "float64",
            ColType::Bool => "bool",
            ColType::Json => "string (JSON)",
        }
    }
}

/// One column of a table: name, type and a line of documentation for `otb export`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Column {
    /// Column name: the field's name as serde names it.
    pub name: &'static str,
    /// Its Parquet type (every column is nullable).
    pub ty: ColType,
    /// One line saying what the column holds.
    pub doc: &'static str,
}

/// Shorthand for declaring columns.
pub const fn col(name: &'static str, ty: ColType, doc: &'static str) -> Column {
    Column { name, ty, doc }
}

/// A typed row of a stored table. Every column is nullable (`Option` fields map to null).
///
/// Implemented with `#[derive(Row)]` (`pipeline::Row`, from the `row-derive` crate):
/// `#[row(table = "...", doc = "...")]` on the struct and a `///` doc comment on every
/// field (its first paragraph is the column's doc), one column per field in field order,
/// the column type inferred from the field's type or given as `#[row(ty = Json)]`.
pub trait Row: Serialize + DeserializeOwned {
    /// The table's file stem, e.g. `scores` -> `scores.parquet`.
    const TABLE: &'static str;
    /// What one row is, for the exported schema docs.
    const DOC: &'static str;
    /// The columns, one per field in field order.
    fn columns() -> &'static [Column];
}

fn schema_of(columns: &[Column]) -> Arc<Schema> {
    Arc::new(Schema::new(
        columns
            .iter()
            .map(|c| {
                let f = Field::new(c.name, c.ty.arrow(), true);
                if c.ty == ColType::Json {
                    f.with_metadata(HashMap::from([(
                        "otb:json".to_string(),
                        "true".to_string(),
                    )]))
                } else {
                    f
                }
            })
            .collect::<Vec<_>>(),
    ))
}

/// Summary of one written table.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TableMeta {
    /// File name inside the entry directory, e.g. `scores.parquet`.
    pub file: String,
    /// sha256 of the file's bytes.
    pub digest: Digest,
    /// Number of rows.
    pub rows: u64,
    /// File size in bytes.
    pub bytes: u64,
}

fn bad(path: &Path, msg: impl Into<String>) -> StoreError {
    StoreError::new(StoreErrorKind::Table(msg.into()), path)
}

/// The values of column `name` of `objects`, `None` where it is null or absent; the
/// first value `conv` does not take is the error.
fn cells<T>(
    objects: &[Map<String, Value>],
    name: &str,
    conv: impl Fn(&Value) -> Option<T>,
) -> Result<Vec<Option<T>>, Value> {
    objects
        .iter()
        .map(|m| match m.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => conv(v).map(Some).ok_or_else(|| v.clone()),
        })
        .collect()
}

/// Convert rows into one Arrow record batch.
pub fn rows_to_batch<R: Row>(rows: &[R], path: &Path) -> Result<RecordBatch, StoreError> {
    let columns = R::columns();
    let objects: Vec<Map<String, Value>> = rows
        .iter()
        .map(|r| match serde_json::to_value(r) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(_) => Err(bad(
                path,
                format!("rows of `{}` must serialize to objects", R::TABLE),
            )),
            Err(e) => Err(bad(path, format!("serializing a `{}` row: {e}", R::TABLE))),
        })
        .collect::<Result<_, _>>()?;
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(columns.len());
    for c in columns {
        let mismatch = |v: Value| {
            bad(
                path,
                format!(
                    "column `{}.{}` expects {}, got {v}",
                    R::TABLE,
                    c.name,
                    c.ty.name()
                ),
            )
        };
        let name = c.name;
        let array: ArrayRef = match c.ty {
            ColType::Str => Arc::new(StringArray::from(
                cells(&objects, name, |v| v.as_str().map(str::to_owned)).map_err(mismatch)?,
            )),
            // serde_json keeps object key order (feature `preserve_order`), so tool
            // schemas keep their parameter order; the bytes are still deterministic
            // for equal rows.
            ColType::Json => Arc::new(StringArray::from(
                cells(&objects, name, |v| Some(v.to_string())).map_err(mismatch)?,
            )),
            ColType::I64 => Arc::new(Int64Array::from(
                cells(&objects, name, Value::as_i64).map_err(mismatch)?,
            )),
            ColType::F64 => Arc::new(Float64Array::from(
                cells(&objects, name, Value::as_f64).map_err(mismatch)?,
            )),
            ColType::Bool => Arc::new(BooleanArray::from(
                cells(&objects, name, Value::as_bool).map_err(mismatch)?,
            )),
        };
        arrays.push(array);
    }
    RecordBatch::try_new(schema_of(columns), arrays)
        .map_err(|e| bad(path, format!("building `{}`: {e}", R::TABLE)))
}

/// Write rows as a Parquet file (snappy, deterministic bytes for equal rows), fsync it,
/// and return its digest.
pub fn write_rows<R: Row>(rows: &[R], path: &Path) -> Result<TableMeta, StoreError> {
    let batch = rows_to_batch(rows, path)?;
    let io = |e: std::io::Error| StoreError::io(path, e);
    let file = std::fs::File::create(path).map_err(io)?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_created_by("opaquetools".to_string())
        .build();
    let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(props))
        .map_err(|e| bad(path, format!("parquet writer: {e}")))?;
    writer
        .write(&batch)
        .map_err(|e| bad(path, format!("parquet write: {e}")))?;
    let mut file = writer
        .into_inner()
        .map_err(|e| bad(path, format!("parquet close: {e}")))?;
    file.flush().map_err(io)?;
    file.sync_all().map_err(io)?;
    let bytes = file.metadata().map_err(io)?.len();
    Ok(TableMeta {
        file: path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        digest: Digest::of_file(path).map_err(io)?,
        rows: rows.len() as u64,
        bytes,
    })
}

/// Read a Parquet file written by [`write_rows`] back into typed rows.
pub fn read_rows<R: Row>(path: &Path) -> Result<Vec<R>, StoreError> {
    let file = std::fs::File::open(path).map_err(|e| StoreError::io(path, e))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| bad(path, format!("not a readable Parquet file: {e}")))?
        .build()
        .map_err(|e| bad(path, format!("parquet reader: {e}")))?;
    let columns = R::columns();
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| bad(path, format!("reading a record batch: {e}")))?;
        let mut objects: Vec<Map<String, Value>> = vec![Map::new(); batch.num_rows()];
        for c in columns {
            let Some(array) = batch.column_by_name(c.name) else {
                return Err(bad(path, format!("missing column `{}`", c.name)));
            };
            fill_column(path, c, array.as_ref(), &mut objects)?;
        }
        for m in objects {
            out.push(
                serde_json::from_value(Value::Object(m))
                    .map_err(|e| bad(path, format!("decoding a `{}` row: {e}", R::TABLE)))?,
            );
        }
    }
    Ok(out)
}

fn fill_column(
    path: &Path,
    c: &Column,
    array: &dyn Array,
    objects: &mut [Map<String, Value>],
) -> Result<(), StoreError> {
    let wrong = || bad(path, format!("column `{}` is not {}", c.name, c.ty.name()));
    let any = array.as_any();
    for (i, m) in objects.iter_mut().enumerate() {
        let v = if array.is_null(i) {
            Value::Null
        } else {
            match c.ty {
                ColType::Str => Value::String(
                    any.downcast_ref::<StringArray>()
                        .ok_or_else(wrong)?
                        .value(i)
                        .to_string(),
                ),
                ColType::Json => {
                    let s = any
                        .downcast_ref::<StringArray>()
                        .ok_or_else(wrong)?
                        .value(i);
                    serde_json::from_str(s).map_err(|e| {
                        bad(path, format!("column `{}` row {i}: bad JSON: {e}", c.name))
                    })?
                }
                ColType::I64 => {
                    Value::from(any.downcast_ref::<Int64Array>().ok_or_else(wrong)?.value(i))
                }
                ColType::F64 => {
                    let x = any
                        .downcast_ref::<Float64Array>()
                        .ok_or_else(wrong)?
                        .value(i);
                    serde_json::Number::from_f64(x)
                        .map(Value::Number)
                        .unwrap_or(Value::Null)
                }
                ColType::Bool => Value::Bool(
                    any.downcast_ref::<BooleanArray>()
                        .ok_or_else(wrong)?
                        .value(i),
                ),
            }
        };
        m.insert(c.name.to_string(), v);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Row;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize, Row)]
    #[row(table = "demo", doc = "a test row")]
    struct Demo {
        /// Id.
        id: String,
        /// The count, over
        /// two lines.
        ///
        /// Not part of the column doc.
        n: i64,
        /// Value.
        x: Option<f64>,
        /// Flag.
        ok: bool,
        /// Arguments.
        args: serde_json::Value,
    }

    #[test]
    fn derived_columns_are_the_fields_in_order_with_their_types_and_docs() {
        assert_eq!(Demo::TABLE, "demo");
        assert_eq!(Demo::DOC, "a test row");
        assert_eq!(
            Demo::columns(),
            [
                col("id", ColType::Str, "Id."),
                col("n", ColType::I64, "The count, over two lines."),
                col("x", ColType::F64, "Value."),
                col("ok", ColType::Bool, "Flag."),
                col("args", ColType::Json, "Arguments."),
            ]
        );
    }

    /// What inference would not pick (`ty`), and a serde rename.
    #[derive(Serialize, Deserialize, Row)]
    #[row(table = "other", doc = "a row with explicit types")]
    struct Other {
        /// A digest as text.
        #[row(ty = Str)]
        digest: Digest,
        #[serde(rename = "when")]
        /// Renamed.
        at: Option<u32>,
    }

    #[test]
    fn explicit_types_and_renames_are_honoured_and_stored() {
        assert_eq!(
            Other::columns(),
            [
                col("digest", ColType::Str, "A digest as text."),
                col("when", ColType::I64, "Renamed."),
            ]
        );
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("o.parquet");
        let row = Other {
            digest: Digest::of_bytes(b"x"),
            at: Some(7),
        };
        write_rows(&[row], &p).unwrap();
        let back: Vec<Other> = read_rows(&p).unwrap();
        assert_eq!(back[0].digest, Digest::of_bytes(b"x"));
        assert_eq!(back[0].at, Some(7));
    }

    fn rows() -> Vec<Demo> {
        vec![
            Demo {
                id: "a".into(),
                n: 1,
                x: Some(0.1),
                ok: true,
                args: serde_json::json!({"k": [1, 2.5]}),
            },
            Demo {
                id: "b".into(),
                n: -7,
                x: None,
                ok: false,
                args: serde_json::Value::Null,
            },
        ]
    }

    #[test]
    fn roundtrip_and_deterministic_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let p1 = dir.path().join("a.parquet");
        let p2 = dir.path().join("b.parquet");
        let m1 = write_rows(&rows(), &p1).unwrap();
        let m2 = write_rows(&rows(), &p2).unwrap();
        assert_eq!(m1.digest, m2.digest, "equal rows must give equal bytes");
        assert_eq!(m1.rows, 2);
        let back: Vec<Demo> = read_rows(&p1).unwrap();
        assert_eq!(back, rows());
    }

    /// `Demo` with other docs: the docs are SCHEMA.md's, not the files'.
    #[derive(Serialize, Deserialize, Row)]
    #[row(table = "demo", doc = "the same columns, other docs")]
    struct Redocumented {
        /// Another text.
        id: String,
        /// Another text.
        n: i64,
        /// Another text.
        x: Option<f64>,
        /// Another text.
        ok: bool,
        /// Another text.
        args: serde_json::Value,
    }

    #[test]
    fn docs_do_not_reach_the_stored_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let again: Vec<Redocumented> = rows()
            .into_iter()
            .map(|r| Redocumented {
                id: r.id,
                n: r.n,
                x: r.x,
                ok: r.ok,
                args: r.args,
            })
            .collect();
        let m1 = write_rows(&rows(), &dir.path().join("a.parquet")).unwrap();
        let m2 = write_rows(&again, &dir.path().join("b.parquet")).unwrap();
        assert_ne!(Demo::DOC, Redocumented::DOC);
        assert_ne!(Demo::columns()[0].doc, Redocumented::columns()[0].doc);
        assert_eq!(
            m1.digest, m2.digest,
            "a doc must not change a table's bytes"
        );
    }

    #[test]
    fn truncated_file_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.parquet");
        write_rows(&rows(), &p).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
        assert!(read_rows::<Demo>(&p).is_err());
    }
}
