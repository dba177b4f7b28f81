//! sluice domain types: decoding InfluxDB write bodies (line protocol and
//! columnar msgpack) into per-measurement columnar batches, series identity,
//! the write-ahead-log encoding of those batches, and the knee rule that the load generator
//! and the autoscaler share.

pub mod batch;
pub mod body;
pub mod codec;
pub mod config;
pub mod escape;
mod fasthash;
pub mod knee;
pub mod line_error;
pub mod lp;
pub mod metric_names;
pub mod msgpack;
pub mod names;
pub mod order;
pub mod precision;
pub mod series;
pub mod testdata;

pub use batch::{
    BatchError, ColumnValues, FieldColumn, FieldType, MeasurementBatch, SeriesDef, StringColumn,
};
pub use body::{NewSeriesKey, NoSchema, ParseOptions, ParsedBody, SchemaLookup};
pub use fasthash::{BuildBytesHasher, KeyHash, KeyHashMap};
pub use line_error::{LineError, LineErrorKind, Origin};
pub use precision::{Precision, PrecisionError};
