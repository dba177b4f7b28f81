//! Columnar batches from the WAL to Arrow `RecordBatch`es for chDB.
//!
//! Several WAL entries of one table are coalesced into one batch; a field missing from some of
//! them becomes nulls there. Column types were fixed by the catalog before the entries were
//! acknowledged, so entries of one table always agree on them.

use std::borrow::Borrow;
use std::sync::Arc;

use chdb_rust::arrow::array::{
    Array, ArrayRef, BooleanArray, Float64Array, Int64Array, MapBuilder, RecordBatch,
    StringBuilder, TimestampNanosecondArray, UInt32Array, UInt64Array, UInt64Builder,
};
use chdb_rust::arrow::buffer::{BooleanBuffer, NullBuffer};
use chdb_rust::arrow::compute::take_record_batch;
use chdb_rust::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use chdb_rust::arrow::error::ArrowError;
use sluice_core::{ColumnValues, FieldType, MeasurementBatch};

use crate::catalog::SEQ_COLUMN;
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

/// A column being assembled from several batches: plain vectors plus validity, turned into an
/// Arrow array at the end without a per-value builder call.
enum Column {
    Float(Vec<f64>),
    Integer(Vec<i64>),
    UInteger(Vec<u64>),
    Boolean(Vec<bool>),
    String(StringBuilder),
}

struct ColumnBuilder {
    values: Column,
    valid: Vec<bool>,
}

impl ColumnBuilder {
    fn new(t: FieldType, capacity: usize) -> Self {
        let values = match t {
            FieldType::Float => Column::Float(Vec::with_capacity(capacity)),
            FieldType::Integer => Column::Integer(Vec::with_capacity(capacity)),
            FieldType::UInteger => Column::UInteger(Vec::with_capacity(capacity)),
            FieldType::Boolean => Column::Boolean(Vec::with_capacity(capacity)),
            FieldType::String => {
                Column::String(StringBuilder::with_capacity(capacity, capacity * 8))
            }
        };
        Self {
            values,
            valid: Vec::with_capacity(capacity),
        }
    }

    fn append_nulls(&mut self, n: usize) {
        self.valid.resize(self.valid.len() + n, false);
        match &mut self.values {
            Column::Float(v) => v.resize(v.len() + n, 0.0),
            Column::Integer(v) => v.resize(v.len() + n, 0),
            Column::UInteger(v) => v.resize(v.len() + n, 0),
            Column::Boolean(v) => v.resize(v.len() + n, false),
            Column::String(b) => (0..n).for_each(|_| b.append_null()),
        }
    }

    /// Appends `values` with validity `valid`; a type mismatch (impossible once the catalog
    /// has fixed types) appends nulls rather than panicking.
    fn append(&mut self, values: &ColumnValues, valid: &[bool]) {
        match (&mut self.values, values) {
            (Column::Float(v), ColumnValues::Float(x)) => v.extend_from_slice(x),
            (Column::Integer(v), ColumnValues::Integer(x)) => v.extend_from_slice(x),
            (Column::UInteger(v), ColumnValues::UInteger(x)) => v.extend_from_slice(x),
            (Column::Boolean(v), ColumnValues::Boolean(x)) => v.extend_from_slice(x),
            (Column::String(b), ColumnValues::String(s)) => {
                for (i, ok) in valid.iter().enumerate() {
                    let text = ok.then(|| s.get(i)).flatten();
                    match text {
                        Some(t) => b.append_value(t),
                        None => b.append_null(),
                    }
                }
            }
            _ => return self.append_nulls(valid.len()),
        }
        self.valid.extend_from_slice(valid);
    }

    fn finish(self) -> ArrayRef {
        let nulls = if self.valid.iter().all(|v| *v) {
            None
        } else {
            Some(NullBuffer::from(self.valid))
        };
        match self.values {
            Column::Float(v) => Arc::new(Float64Array::new(v.into(), nulls)),
            Column::Integer(v) => Arc::new(Int64Array::new(v.into(), nulls)),
            Column::UInteger(v) => Arc::new(UInt64Array::new(v.into(), nulls)),
            Column::Boolean(v) => Arc::new(BooleanArray::new(BooleanBuffer::from(v), nulls)),
            Column::String(mut b) => Arc::new(b.finish()),
        }
    }
}

/// Coalesces batches of one measurement table into one Arrow batch: `time`, `series_id`, the
/// WAL sequence number of each row's entry (`seqs[i]` for `batches[i]`, see
/// [`crate::catalog::SEQ_COLUMN`]), then every field seen, in order of first appearance. Rows
/// are ordered by series, then time ([`sluice_core::order`]).
pub fn measurement_batches<B: Borrow<MeasurementBatch>>(
    batches: &[B],
    seqs: &[u64],
) -> Result<RecordBatch, ArrowError> {
    if seqs.len() != batches.len() {
        return Err(ArrowError::InvalidArgumentError(format!(
            "{} batches but {} sequence numbers",
            batches.len(),
            seqs.len()
        )));
    }
    let batches: Vec<&MeasurementBatch> = batches.iter().map(Borrow::borrow).collect();
    let rows: usize = batches.iter().map(|b| b.len()).sum();
    let mut fields: Vec<(String, FieldType)> = Vec::new();
    for b in &batches {
        for c in &b.fields {
            if !fields.iter().any(|(n, _)| n == &c.name) {
                fields.push((c.name.clone(), column_type(&c.values)));
            }
        }
    }
    let mut time = Vec::with_capacity(rows);
    let mut series = Vec::with_capacity(rows);
    let mut seq = Vec::with_capacity(rows);
    let mut builders: Vec<ColumnBuilder> = fields
        .iter()
        .map(|(_, t)| ColumnBuilder::new(*t, rows))
        .collect();
    for (b, &s) in batches.iter().zip(seqs) {
        time.extend_from_slice(&b.time_ns);
        series.extend_from_slice(&b.series_id);
        seq.resize(seq.len() + b.len(), s);
        for ((name, _), builder) in fields.iter().zip(builders.iter_mut()) {
            match b.fields.iter().find(|c| &c.name == name) {
                Some(c) => builder.append(&c.values, &c.valid),
                None => builder.append_nulls(b.len()),
            }
        }
    }
    // Sorted as the table stores them, which spares chDB its own, slower, sort.
    let order = sluice_core::order::sort_order(&series, &time);
    let mut schema_fields = vec![
        Field::new(
            "time",
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
            false,
        ),
        Field::new("series_id", DataType::UInt64, false),
        Field::new(SEQ_COLUMN, DataType::UInt64, false),
    ];
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(TimestampNanosecondArray::new(time.into(), None).with_timezone("UTC")),
        Arc::new(UInt64Array::new(series.into(), None)),
        Arc::new(UInt64Array::new(seq.into(), None)),
    ];
    for ((name, t), b) in fields.into_iter().zip(builders) {
        schema_fields.push(Field::new(name, arrow_type(t), true));
        columns.push(b.finish());
    }
    let batch = RecordBatch::try_new(Arc::new(Schema::new(schema_fields)), columns)?;
    match order {
        None => Ok(batch),
        Some(perm) => take_record_batch(&batch, &UInt32Array::from(perm)),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use chdb_rust::arrow::array::{AsArray, StringArray};
    use chdb_rust::arrow::datatypes::{Float64Type, UInt64Type};
    use sluice_core::{FieldColumn, StringColumn};

    fn batch(rows: &[(i64, Option<f64>)], text: Option<&[Option<&str>]>) -> MeasurementBatch {
        let mut b = MeasurementBatch::new("m".into());
        b.time_ns = rows.iter().map(|r| r.0).collect();
        b.series_id = vec![7; rows.len()];
        b.line = (1..=rows.len() as u32).collect();
        let mut f = FieldColumn::new("v".into(), FieldType::Float);
        f.values = ColumnValues::Float(rows.iter().map(|r| r.1.unwrap_or(0.0)).collect());
        f.valid = rows.iter().map(|r| r.1.is_some()).collect();
        b.fields.push(f);
        if let Some(text) = text {
            let mut s = StringColumn::new();
            for t in text {
                s.try_push(t.unwrap_or("")).unwrap();
            }
            let mut c = FieldColumn::new("s".into(), FieldType::String);
            c.values = ColumnValues::String(s);
            c.valid = text.iter().map(|t| t.is_some()).collect();
            b.fields.push(c);
        }
        b
    }

    #[test]
    fn coalesced_batches_fill_missing_fields_with_nulls() {
        let a = batch(&[(1, Some(1.5)), (2, None)], None);
        let b = batch(&[(3, Some(3.5))], Some(&[Some("x")]));
        let c = batch(&[(4, None)], Some(&[None]));
        let rb = measurement_batches(&[a, b, c], &[5, 6, 9]).unwrap();
        assert_eq!(rb.num_rows(), 4);
        let names: Vec<_> = rb
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(names, ["time", "series_id", SEQ_COLUMN, "v", "s"]);
        let seq = rb.column(2).as_primitive::<UInt64Type>();
        assert_eq!(seq.values().to_vec(), [5, 5, 6, 9]);
        let v = rb.column(3).as_primitive::<Float64Type>();
        assert_eq!(
            (0..4)
                .map(|i| v.is_valid(i).then(|| v.value(i)))
                .collect::<Vec<_>>(),
            [Some(1.5), None, Some(3.5), None]
        );
        let s = rb.column(4).as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(
            (0..4)
                .map(|i| s.is_valid(i).then(|| s.value(i)))
                .collect::<Vec<_>>(),
            [None, None, Some("x"), None]
        );
        assert_eq!(rb.column(3).null_count(), 2);
        assert!(measurement_batches(&[batch(&[(1, None)], None)], &[]).is_err());
    }

    #[test]
    fn rows_come_out_in_series_then_time_order_with_their_values() {
        // Two entries of interleaved series 9 and 3, one row of series 9 arriving late.
        let mut a = batch(&[(2, Some(1.0)), (1, Some(2.0)), (3, None)], None);
        a.series_id = vec![9, 3, 9];
        let mut b = batch(&[(1, Some(4.0)), (2, Some(5.0))], Some(&[Some("x"), None]));
        b.series_id = vec![9, 3];
        let rb = measurement_batches(&[a, b], &[1, 2]).unwrap();
        let col = |i: usize| rb.column(i).as_primitive::<UInt64Type>().values().to_vec();
        assert_eq!(col(1), [3, 3, 9, 9, 9]);
        let time = rb
            .column(0)
            .as_primitive::<chdb_rust::arrow::datatypes::TimestampNanosecondType>();
        assert_eq!(time.values().to_vec(), [1, 2, 1, 2, 3]);
        assert_eq!(col(2), [1, 2, 2, 1, 1]);
        let v = rb.column(3).as_primitive::<Float64Type>();
        assert_eq!(
            (0..5)
                .map(|i| v.is_valid(i).then(|| v.value(i)))
                .collect::<Vec<_>>(),
            [Some(2.0), Some(5.0), Some(4.0), Some(1.0), None]
        );
        let s = rb.column(4).as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(
            (0..5)
                .map(|i| s.is_valid(i).then(|| s.value(i)))
                .collect::<Vec<_>>(),
            [None, None, Some("x"), None, None]
        );
    }

    #[test]
    fn all_valid_columns_carry_no_null_buffer() {
        let rb = measurement_batches(&[batch(&[(1, Some(1.0))], None)], &[1]).unwrap();
        assert!(rb.column(3).nulls().is_none());
    }
}
