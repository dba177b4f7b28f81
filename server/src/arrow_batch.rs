//! Columnar batches from the WAL to Arrow `RecordBatch`es for chDB.
//!
//! Several WAL entries of one table are coalesced into one batch; a field missing from some of
//! them becomes nulls there. Column types were fixed by the catalog before the entries were
//! acknowledged, so entries of one table always agree on them.

use std::sync::Arc;

use chdb_rust::arrow::array::{
    Array, ArrayRef, BooleanBuilder, Float64Builder, Int64Builder, MapBuilder, RecordBatch,
    StringBuilder, TimestampNanosecondArray, UInt64Array, UInt64Builder,
};
use chdb_rust::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use chdb_rust::arrow::error::ArrowError;
use sluice_core::{ColumnValues, FieldType, MeasurementBatch};

use crate::payload::SeriesRow;

fn arrow_type(t: FieldType) -> DataType {
    match t {
        FieldType::Float => DataType::Float64,
        FieldType::Integer => DataType::Int64,
        FieldType::UInteger => DataType::UInt64,
        FieldType::String => DataType::Utf8,
        FieldType::Boolean => DataType::Boolean,
    }
}

fn column_type(v: &ColumnValues) -> FieldType {
    match v {
        ColumnValues::Float(_) => FieldType::Float,
        ColumnValues::Integer(_) => FieldType::Integer,
        ColumnValues::UInteger(_) => FieldType::UInteger,
        ColumnValues::String(_) => FieldType::String,
        ColumnValues::Boolean(_) => FieldType::Boolean,
    }
}

/// One builder per field type; appends a batch's column or `n` nulls.
enum Builder {
    Float(Float64Builder),
    Integer(Int64Builder),
    UInteger(UInt64Builder),
    String(StringBuilder),
    Boolean(BooleanBuilder),
}

impl Builder {
    fn new(t: FieldType, capacity: usize) -> Self {
        match t {
            FieldType::Float => Builder::Float(Float64Builder::with_capacity(capacity)),
            FieldType::Integer => Builder::Integer(Int64Builder::with_capacity(capacity)),
            FieldType::UInteger => Builder::UInteger(UInt64Builder::with_capacity(capacity)),
            FieldType::String => {
                Builder::String(StringBuilder::with_capacity(capacity, capacity * 8))
            }
            FieldType::Boolean => Builder::Boolean(BooleanBuilder::with_capacity(capacity)),
        }
    }

    fn append_nulls(&mut self, n: usize) {
        match self {
            Builder::Float(b) => b.append_nulls(n),
            Builder::Integer(b) => b.append_nulls(n),
            Builder::UInteger(b) => b.append_nulls(n),
            Builder::String(b) => {
                for _ in 0..n {
                    b.append_null()
                }
            }
            Builder::Boolean(b) => b.append_nulls(n),
        }
    }

    /// Appends `values` with validity `valid`; a type mismatch (impossible once the catalog
    /// has fixed types) appends nulls rather than panicking.
    fn append(&mut self, values: &ColumnValues, valid: &[bool]) {
        match (self, values) {
            (Builder::Float(b), ColumnValues::Float(v)) => b.append_values(v, valid),
            (Builder::Integer(b), ColumnValues::Integer(v)) => b.append_values(v, valid),
            (Builder::UInteger(b), ColumnValues::UInteger(v)) => b.append_values(v, valid),
            (Builder::Boolean(b), ColumnValues::Boolean(v)) => {
                for (x, ok) in v.iter().zip(valid) {
                    b.append_option(ok.then_some(*x));
                }
            }
            (Builder::String(b), ColumnValues::String(s)) => {
                for (i, ok) in valid.iter().enumerate() {
                    if !*ok {
                        b.append_null();
                        continue;
                    }
                    let (start, end) = (s.offsets[i] as usize, s.offsets[i + 1] as usize);
                    match s.data.get(start..end).map(std::str::from_utf8) {
                        Some(Ok(v)) => b.append_value(v),
                        _ => b.append_null(),
                    }
                }
            }
            (b, _) => b.append_nulls(valid.len()),
        }
    }

    fn finish(self) -> ArrayRef {
        match self {
            Builder::Float(mut b) => Arc::new(b.finish()),
            Builder::Integer(mut b) => Arc::new(b.finish()),
            Builder::UInteger(mut b) => Arc::new(b.finish()),
            Builder::String(mut b) => Arc::new(b.finish()),
            Builder::Boolean(mut b) => Arc::new(b.finish()),
        }
    }
}

/// Coalesces batches of one measurement table into one Arrow batch: `time`, `series_id`, then
/// every field seen, in order of first appearance.
pub fn measurement_batches(batches: &[MeasurementBatch]) -> Result<RecordBatch, ArrowError> {
    let rows: usize = batches.iter().map(|b| b.len()).sum();
    let mut fields: Vec<(String, FieldType)> = Vec::new();
    for b in batches {
        for c in &b.fields {
            if !fields.iter().any(|(n, _)| n == &c.name) {
                fields.push((c.name.clone(), column_type(&c.values)));
            }
        }
    }
    let mut time = Vec::with_capacity(rows);
    let mut series = Vec::with_capacity(rows);
    let mut builders: Vec<Builder> = fields.iter().map(|(_, t)| Builder::new(*t, rows)).collect();
    for b in batches {
        time.extend_from_slice(&b.time_ns);
        series.extend_from_slice(&b.series_id);
        for ((name, _), builder) in fields.iter().zip(builders.iter_mut()) {
            match b.fields.iter().find(|c| &c.name == name) {
                Some(c) => builder.append(&c.values, &c.valid),
                None => builder.append_nulls(b.len()),
            }
        }
    }
    let mut schema_fields = vec![
        Field::new(
            "time",
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
            false,
        ),
        Field::new("series_id", DataType::UInt64, false),
    ];
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(TimestampNanosecondArray::from(time).with_timezone("UTC")),
        Arc::new(UInt64Array::from(series)),
    ];
    for ((name, t), b) in fields.into_iter().zip(builders) {
        schema_fields.push(Field::new(name, arrow_type(t), true));
        columns.push(b.finish());
    }
    RecordBatch::try_new(Arc::new(Schema::new(schema_fields)), columns)
}

/// Rows for the series dimension table.
pub fn series_batch(rows: &[SeriesRow]) -> Result<RecordBatch, ArrowError> {
    let mut db = StringBuilder::new();
    let mut measurement = StringBuilder::new();
    let mut ids = UInt64Builder::with_capacity(rows.len());
    let mut first = Vec::with_capacity(rows.len());
    let mut tags = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
    for r in rows {
        db.append_value(&r.db);
        measurement.append_value(&r.measurement);
        ids.append_value(r.series_id);
        first.push(r.first_seen_ns);
        for (k, v) in &r.tags {
            tags.keys().append_value(k);
            tags.values().append_value(v);
        }
        tags.append(true)?;
    }
    let tags = tags.finish();
    let tags_field = Field::new("tags", tags.data_type().clone(), false);
    let schema = Schema::new(vec![
        Field::new("db", DataType::Utf8, false),
        Field::new("measurement", DataType::Utf8, false),
        Field::new("series_id", DataType::UInt64, false),
        tags_field,
        Field::new(
            "first_seen",
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
            false,
        ),
    ]);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(db.finish()),
        Arc::new(measurement.finish()),
        Arc::new(ids.finish()),
        Arc::new(tags),
        Arc::new(TimestampNanosecondArray::from(first).with_timezone("UTC")),
    ];
    RecordBatch::try_new(Arc::new(schema), columns)
}
