//! sluice-server: durable InfluxDB-compatible ingest into embedded chDB.
//!
//! The write path: `http` accepts a request, `ingest` parses and validates it into columnar
//! batches and encodes them, `wal` makes them durable (group commit) before the 204, `flush`
//! moves them into chDB through `engine`, exactly once. `catalog` knows databases, tables and
//! series; `query` serves reads.

pub mod app;
pub mod arrow_batch;
pub mod catalog;
pub mod cluster;
pub mod disk;
pub mod engine;
pub mod flush;
pub mod handoff;
pub mod http;
pub mod ingest;
pub mod memory;
pub mod metrics;
pub mod parse_pool;
pub mod payload;
pub mod priority;
pub mod query;
pub mod series_cache;
pub mod series_rule;
pub mod sql_guard;
pub mod wal;
