//! The SQL of sluice's tables: their columns and types, settings, merge policy, and TTL.
//! Every identifier is quoted; nothing here runs a statement except the catalog's own reads.

use std::time::Duration;

use chdb_rust::format::OutputFormat;
use sluice_core::names::quote_ident;
use sluice_core::FieldType;

use super::{unescape_tsv, SERIES_TABLE};
use crate::engine::{Engine, EngineError};

/// Deduplication window kept by every table, in inserts: far more than the flushes that can
/// be in doubt after a crash (one per table).
const DEDUP_WINDOW: u32 = 1000;

pub fn chdb_type(t: FieldType) -> &'static str {
    match t {
        FieldType::Float => "Float64",
        FieldType::Integer => "Int64",
        FieldType::UInteger => "UInt64",
        FieldType::String => "String",
        FieldType::Boolean => "Bool",
    }
}

pub(super) fn field_type_of(chdb: &str) -> Option<FieldType> {
    let inner = chdb
        .strip_prefix("Nullable(")
        .and_then(|s| s.strip_suffix(')'))
        .unwrap_or(chdb);
    Some(match inner {
        "Float64" => FieldType::Float,
        "Int64" => FieldType::Integer,
        "UInt64" => FieldType::UInteger,
        "String" => FieldType::String,
        "Bool" => FieldType::Boolean,
        _ => return None,
    })
}

/// The WAL sequence number of the entry each row came from. Recovery asks which entries of an
/// interrupted flush are already in the table instead of trusting chDB's deduplication log,
/// whose record of an insert can reach the disk before the insert's part does (a crash between
/// the two would make the replay look like a duplicate and drop it). `MATERIALIZED` keeps it
/// out of `SELECT *`; the flush sets it explicitly (`insert_allow_materialized_columns`).
pub const SEQ_COLUMN: &str = "_sluice_seq";

/// The column's definition.
fn seq_column_sql() -> String {
    format!("{} UInt64 MATERIALIZED 0", quote_ident(SEQ_COLUMN))
}

/// Its skip index (recovery reads a narrow range of it), without the `INDEX` keyword.
fn seq_index_sql() -> String {
    format!(
        "{} {} TYPE minmax GRANULARITY 1",
        quote_ident(&format!("{SEQ_COLUMN}_idx")),
        quote_ident(SEQ_COLUMN)
    )
}

/// Adds the sequence column to a table made by an earlier version (its old rows read as 0,
/// which no WAL entry has).
pub fn add_seq_column_sql(table: &str) -> Vec<String> {
    let table = quote_ident(table);
    vec![
        format!(
            "ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {}",
            seq_column_sql()
        ),
        format!(
            "ALTER TABLE {table} ADD INDEX IF NOT EXISTS {}",
            seq_index_sql()
        ),
    ]
}

/// Where a row came from: 0 for rows written to this pod, else the hand-off and chunk that
/// brought it from a pod that left the tenant (see [`crate::handoff`]). Reads leave out the
/// rows of a hand-off that is not settled yet, so a row is never counted on both pods.
pub const ORIGIN_COLUMN: &str = "_sluice_origin";

fn origin_column_sql() -> String {
    format!("{} UInt64 MATERIALIZED 0", quote_ident(ORIGIN_COLUMN))
}

/// Its skip index: handed rows arrive in parts of one origin each, so counting a chunk reads
/// only its parts.
fn origin_index_sql() -> String {
    format!(
        "{} {} TYPE minmax GRANULARITY 1",
        quote_ident(&format!("{ORIGIN_COLUMN}_idx")),
        quote_ident(ORIGIN_COLUMN)
    )
}

/// Adds the origin column to a table made by an earlier version (its rows are its own: 0).
pub fn add_origin_column_sql(table: &str) -> Vec<String> {
    let table = quote_ident(table);
    vec![
        format!(
            "ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {}",
            origin_column_sql()
        ),
        format!(
            "ALTER TABLE {table} ADD INDEX IF NOT EXISTS {}",
            origin_index_sql()
        ),
    ]
}

/// How many parts of similar size chDB lets accumulate before merging them into one (its
/// default is 5). Every merge rewrites its rows, so a row is rewritten about
/// log_base(table size / part size) times: at the write path's rate that was the largest single
/// cost (about 450 ns per point with base 5, about 200 with 20, in a 30 s run at 1 M points/s).
/// The price is more live parts for a query to open (some tens, far from chDB's limits).
pub const MERGE_SELECTOR_BASE: u32 = 20;

/// The merge policy of every sluice table, as MergeTree settings.
///
/// `vertical_merge_algorithm_min_columns_to_activate = 1`: chDB merges a part of 131,072 rows
/// or more vertically only when the table has 11 columns or more (its default), and a
/// measurement table has fewer (time, series, a few fields, the sequence). A horizontal merge
/// carries every column through the sorted merge of the key; a vertical one merges the key
/// columns once and then copies each other column by the resulting row order. Rewriting a row
/// cost 145-150 ns of merge CPU horizontally and 81-84 vertically (1 M-row parts, 5 float
/// fields, 2.5 M points/s).
///
/// `merge_with_ttl_timeout = 3600`: rows past their retention go in TTL merges, which the
/// engine runs at most this often per part (its default is 4 hours, so a table kept up to four
/// hours of expired rows: at 2.5 M points/s about 270 GB).
pub const MERGE_SETTINGS: [(&str, u32); 3] = [
    ("merge_selector_base", MERGE_SELECTOR_BASE),
    ("vertical_merge_algorithm_min_columns_to_activate", 1),
    ("merge_with_ttl_timeout", MERGE_WITH_TTL_TIMEOUT_S),
];

/// Seconds between two TTL merges of a part at most (see [`MERGE_SETTINGS`]).
pub const MERGE_WITH_TTL_TIMEOUT_S: u32 = 3600;

/// MergeTree settings every sluice table carries: a deduplication window, so a replayed flush
/// with the same token is dropped; fsync of each new part, so what the WAL lets go of is on
/// disk; and the merge policy ([`MERGE_SETTINGS`]).
fn table_settings() -> String {
    format!(
        "SETTINGS non_replicated_deduplication_window = {DEDUP_WINDOW}, fsync_after_insert = 1, fsync_part_directory = 1, {}",
        merge_settings()
    )
}

fn merge_settings() -> String {
    each_merge_setting(|name, value| format!("{name} = {value}"), ", ")
}

/// A condition on `system.tables` true for tables that already carry every merge setting.
fn has_merge_settings_sql() -> String {
    each_merge_setting(
        // Whole words: `= 1` must not pass for `= 11`.
        |name, value| format!("match(create_table_query, '\\\\b{name} = {value}\\\\b')"),
        " AND ",
    )
}

fn each_merge_setting(item: impl Fn(&str, u32) -> String, separator: &str) -> String {
    MERGE_SETTINGS
        .iter()
        .map(|&(name, value)| item(name, value))
        .collect::<Vec<_>>()
        .join(separator)
}

/// Tables (measurement and series) that lack part of today's merge policy: made by an earlier
/// version, until [`Catalog::load`] adopts it for them.
pub fn tables_without_merge_policy(engine: &Engine) -> Result<Vec<String>, EngineError> {
    let stale = engine.query(
        &format!(
            "SELECT name FROM system.tables WHERE database = currentDatabase() AND engine LIKE '%MergeTree' AND NOT ({})",
            has_merge_settings_sql()
        ),
        OutputFormat::TabSeparated,
    )?;
    Ok(String::from_utf8_lossy(&stale)
        .lines()
        .map(unescape_tsv)
        .collect())
}

/// Gives a table made by an earlier version today's merge policy (a metadata change only).
pub fn modify_merge_settings_sql(table: &str) -> String {
    format!(
        "ALTER TABLE {} MODIFY SETTING {}",
        quote_ident(table),
        merge_settings()
    )
}

/// `CREATE TABLE` for a measurement table.
pub fn create_table_sql(
    table: &str,
    ttl: Option<Duration>,
    fields: &[(String, FieldType)],
) -> String {
    let mut cols = vec![
        "`time` DateTime64(9, 'UTC')".to_string(),
        "`series_id` UInt64".to_string(),
    ];
    for (name, t) in fields {
        cols.push(format!("{} Nullable({})", quote_ident(name), chdb_type(*t)));
    }
    cols.push(seq_column_sql());
    cols.push(origin_column_sql());
    cols.push(format!("INDEX {}", seq_index_sql()));
    cols.push(format!("INDEX {}", origin_index_sql()));
    let ttl = match ttl {
        Some(_) => format!(" TTL {}", ttl_sql(ttl)),
        None => String::new(),
    };
    format!(
        "CREATE TABLE IF NOT EXISTS {} ({}) ENGINE = MergeTree ORDER BY (`series_id`, `time`){} {}",
        quote_ident(table),
        cols.join(", "),
        ttl,
        table_settings()
    )
}

/// The TTL expression of a retention policy's duration, as the engine prints it back in
/// `system.tables.create_table_query` (empty for an infinite policy).
pub fn ttl_sql(ttl: Option<Duration>) -> String {
    match ttl {
        Some(d) => format!(
            "toDateTime(time) + toIntervalSecond({})",
            d.as_secs().max(1)
        ),
        None => String::new(),
    }
}

/// Sets (or removes) a table's TTL.
pub fn modify_ttl_sql(table: &str, ttl: Option<Duration>) -> String {
    match ttl {
        Some(_) => format!(
            "ALTER TABLE {} MODIFY TTL {}",
            quote_ident(table),
            ttl_sql(ttl)
        ),
        None => format!("ALTER TABLE {} REMOVE TTL", quote_ident(table)),
    }
}

/// Every measurement table with the TTL expression it has now (empty: none).
pub(super) fn table_ttls(engine: &Engine) -> Result<Vec<(String, String)>, EngineError> {
    let out = engine.query(
        &format!(
            "SELECT name, extract(create_table_query, ' TTL (.+?) SETTINGS ') FROM system.tables WHERE database = currentDatabase() AND engine = 'MergeTree' AND name != '{SERIES_TABLE}'"
        ),
        OutputFormat::TabSeparated,
    )?;
    Ok(String::from_utf8_lossy(&out)
        .lines()
        .filter_map(|l| {
            let (t, ttl) = l.split_once('\t')?;
            Some((unescape_tsv(t), unescape_tsv(ttl)))
        })
        .collect())
}

pub(super) fn series_table_sql() -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {} (`db` String, `measurement` String, `series_id` UInt64, `tags` Map(String, String), `first_seen` DateTime64(9, 'UTC')) ENGINE = ReplacingMergeTree ORDER BY (`db`, `measurement`, `series_id`) {}",
        quote_ident(SERIES_TABLE),
        table_settings()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_table_quotes_everything_and_sets_ttl() {
        let sql = create_table_sql(
            "db_rp_cpu`x",
            Some(Duration::from_secs(86400)),
            &[
                ("us`er".into(), FieldType::Float),
                ("n".into(), FieldType::Integer),
            ],
        );
        assert!(sql.contains("`db_rp_cpu\\`x`"), "{sql}");
        assert!(sql.contains("`us\\`er` Nullable(Float64)"), "{sql}");
        assert!(sql.contains("`n` Nullable(Int64)"), "{sql}");
        assert!(
            sql.contains("TTL toDateTime(time) + toIntervalSecond(86400)"),
            "{sql}"
        );
        assert!(sql.contains("ORDER BY (`series_id`, `time`)"), "{sql}");
        assert!(!create_table_sql("t", None, &[]).contains("TTL"));
    }

    #[test]
    fn chdb_types_map_back() {
        for t in [
            FieldType::Float,
            FieldType::Integer,
            FieldType::UInteger,
            FieldType::String,
            FieldType::Boolean,
        ] {
            assert_eq!(
                field_type_of(&format!("Nullable({})", chdb_type(t))),
                Some(t)
            );
        }
        assert_eq!(unescape_tsv("a\\tb\\\\c"), "a\tb\\c");
    }
}
