//! The SQL of a hand-off, built here and nowhere else: what the leaving pod serves, what the
//! receiving pod inserts and counts, and the filter that keeps an unsettled copy out of reads.

use sluice_core::names::quote_ident;

use crate::catalog::{ORIGIN_COLUMN, SERIES_TABLE};

/// The low bits of an origin value number the chunk; the high bits are the hand-off's id.
pub const CHUNK_BITS: u32 = 20;
/// Hand-off ids have this many bits, so that id and chunk fit one `UInt64`.
pub const ID_BITS: u32 = 64 - CHUNK_BITS;

/// The origin value of the rows of chunk `chunk` of hand-off `id`.
pub fn origin(id: u64, chunk: u32) -> u64 {
    (id << CHUNK_BITS) | u64::from(chunk)
}

/// The hand-off id of a row's origin value, in SQL.
fn id_of_origin() -> String {
    format!(
        "bitShiftRight({}, {CHUNK_BITS})",
        quote_ident(ORIGIN_COLUMN)
    )
}

/// The columns a table travels with: time, series and this pod's fields, by name.
pub fn columns(fields: &[(String, String)]) -> Vec<String> {
    let mut cols = vec!["time".to_string(), "series_id".to_string()];
    cols.extend(fields.iter().map(|(f, _)| f.clone()));
    cols
}

fn quoted(cols: &[String]) -> String {
    cols.iter()
        .map(|c| quote_ident(c))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `url()` structure of those columns (`chdb_types` as the table declares them).
pub fn structure(fields: &[(String, &str)]) -> String {
    let mut cols = vec![
        "`time` DateTime64(9, 'UTC')".to_string(),
        "`series_id` UInt64".to_string(),
    ];
    cols.extend(
        fields
            .iter()
            .map(|(f, t)| format!("{} Nullable({t})", quote_ident(f))),
    );
    cols.join(", ")
}

/// A chunk's rows as the leaving pod serves them.
pub fn rows_sql(table: &str, cols: &[String], lo: u64, hi: u64) -> String {
    format!(
        "SELECT {} FROM {} WHERE series_id BETWEEN {lo} AND {hi}",
        quoted(cols),
        quote_ident(table)
    )
}

/// The series rows as the leaving pod serves them.
pub fn series_rows_sql() -> String {
    format!(
        "SELECT db, measurement, series_id, tags, first_seen FROM {}",
        quote_ident(SERIES_TABLE)
    )
}

pub const SERIES_ROWS_STRUCTURE: &str =
    "db String, measurement String, series_id UInt64, tags Map(String, String), first_seen DateTime64(9, 'UTC')";

/// The receiver's insert of the series rows it reads from `url` (the table replaces
/// duplicates, so a repeated copy adds nothing a read would see).
pub fn insert_series_sql(url: &str) -> String {
    format!(
        "INSERT INTO {} (db, measurement, series_id, tags, first_seen) SELECT * FROM {url}",
        quote_ident(SERIES_TABLE)
    )
}

/// The receiver's insert of a chunk it reads from `url`, each row marked with `origin`.
pub fn insert_chunk_sql(table: &str, cols: &[String], origin: u64, url: &str) -> String {
    format!(
        "INSERT INTO {} ({}, {}) SELECT {}, toUInt64({origin}) FROM {url} SETTINGS insert_allow_materialized_columns = 1",
        quote_ident(table),
        quoted(cols),
        quote_ident(ORIGIN_COLUMN),
        quoted(cols),
    )
}

/// The rows of one chunk at the receiver.
pub fn count_chunk_sql(table: &str, origin: u64) -> String {
    format!(
        "SELECT count() FROM {} WHERE {} = {origin}",
        quote_ident(table),
        quote_ident(ORIGIN_COLUMN)
    )
}

/// Removes rows marked `origin` (a chunk half copied when a pod was killed), or with
/// `whole` every row of the hand-off `origin >> CHUNK_BITS`.
pub fn delete_sql(table: &str, id_or_origin: u64, whole: bool) -> String {
    let cond = if whole {
        format!("{} = {id_or_origin}", id_of_origin())
    } else {
        format!("{} = {id_or_origin}", quote_ident(ORIGIN_COLUMN))
    };
    format!(
        "ALTER TABLE {} DELETE WHERE {cond} SETTINGS mutations_sync = 2",
        quote_ident(table)
    )
}

/// Row count and an order-free hash of `cols` over a table's rows (`id`: only those of that
/// hand-off). Equal on both sides means the same multiset of rows, up to hash collisions.
pub fn digest_sql(table: &str, cols: &[String], id: Option<u64>) -> String {
    let filter = match id {
        Some(id) => format!(" WHERE {} = {id}", id_of_origin()),
        None => String::new(),
    };
    format!(
        "SELECT count(), sum(sipHash64(tuple({}))) FROM {}{filter}",
        quoted(cols),
        quote_ident(table)
    )
}

/// Boundaries splitting a table into `k` chunks of about equal rows by series id.
pub fn bounds_sql(table: &str, k: u64) -> String {
    let levels: Vec<String> = (1..k).map(|i| format!("{}", i as f64 / k as f64)).collect();
    format!(
        "SELECT arrayJoin(quantiles({})(series_id)) FROM {}",
        levels.join(", "),
        quote_ident(table)
    )
}

/// Chunks from sorted boundaries: `[0, b1)`, `[b1, b2)`, ..., `[bk, MAX]`, as inclusive ranges.
pub fn ranges(mut bounds: Vec<u64>) -> Vec<(u64, u64)> {
    bounds.sort_unstable();
    bounds.dedup();
    bounds.retain(|b| *b > 0);
    let mut out = Vec::new();
    let mut lo = 0u64;
    for b in bounds {
        out.push((lo, b - 1));
        lo = b;
    }
    out.push((lo, u64::MAX));
    out
}

/// A table's source for a read: the table, or the table without the rows of the hand-offs in
/// `excluded` (received, not settled).
pub fn counted_source(table: &str, excluded: &[u64]) -> String {
    match counted_filter(excluded) {
        None => quote_ident(table),
        Some(filter) => format!("(SELECT * FROM {} WHERE {filter})", quote_ident(table)),
    }
}

/// The condition that leaves out the rows of the hand-offs in `excluded`; `None` when none is.
pub fn counted_filter(excluded: &[u64]) -> Option<String> {
    if excluded.is_empty() {
        return None;
    }
    let ids: Vec<String> = excluded.iter().map(u64::to_string).collect();
    Some(format!("{} NOT IN ({})", id_of_origin(), ids.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_every_id_once() {
        assert_eq!(ranges(vec![]), vec![(0, u64::MAX)]);
        assert_eq!(
            ranges(vec![30, 10, 10, 0]),
            vec![(0, 9), (10, 29), (30, u64::MAX)]
        );
    }

    #[test]
    fn origins_keep_id_and_chunk_apart() {
        let o = origin(5, 3);
        assert_eq!(o >> CHUNK_BITS, 5);
        assert_eq!(o & ((1 << CHUNK_BITS) - 1), 3);
        assert_eq!(counted_source("t", &[]), "`t`");
        let s = counted_source("t", &[5, 6]);
        assert!(
            s.contains("bitShiftRight(`_sluice_origin`, 20) NOT IN (5, 6)"),
            "{s}"
        );
        let d = digest_sql("t`x", &columns(&[("v".into(), "float".into())]), Some(5));
        assert!(d.contains("tuple(`time`, `series_id`, `v`)"), "{d}");
        assert!(d.contains("FROM `t\\`x` WHERE"), "{d}");
        assert!(bounds_sql("t", 4).contains("quantiles(0.25, 0.5, 0.75)"));
    }
}
