//! What exists: databases and their retention policies, tables and their field types, and the
//! series seen so far.
//!
//! Schema changes (a new table, a new field) are applied to chDB before the write that brings
//! them is acknowledged, so that a flush never meets a column that does not exist and a
//! restart can rebuild this catalog from chDB alone.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use chdb_rust::format::OutputFormat;
use sluice_core::config::{DatabaseConfig, RetentionPolicyConfig, ServerConfig};
use sluice_core::names::{quote_ident, quote_str, table_name, validate_name, NameError};
use sluice_core::{FieldType, KeyHash, SchemaLookup};

use crate::engine::{Engine, EngineError};
use crate::series_cache::SeriesKeyCache;
use crate::wal::Wal;

/// The dimension table holding one row per series.
pub const SERIES_TABLE: &str = "sluice_series";

/// Deduplication window kept by every table, in inserts: far more than the flushes that can
/// be in doubt after a crash (one per table).
const DEDUP_WINDOW: u32 = 1000;

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("database not found: \"{0}\"")]
    DatabaseNotFound(String),
    #[error("retention policy not found: \"{rp}\" (database \"{db}\")")]
    RetentionPolicyNotFound { db: String, rp: String },
    #[error("invalid database name {name:?}: {source}")]
    BadName { name: String, source: NameError },
    #[error("chDB: {0}")]
    Engine(#[from] EngineError),
    #[error("cannot store the database list: {0}")]
    Meta(String),
}

#[derive(Debug, Clone)]
pub struct Database {
    pub policies: Vec<RetentionPolicyConfig>,
}

impl Database {
    fn default_policy(&self) -> Option<&RetentionPolicyConfig> {
        self.policies.iter().find(|p| p.default)
    }
}

/// A resolved write target.
#[derive(Debug, Clone)]
pub struct Target {
    pub db: String,
    pub rp: String,
    pub ttl: Option<Duration>,
}

pub struct Catalog {
    engine: Arc<Engine>,
    auto_create: bool,
    databases: RwLock<BTreeMap<String, Database>>,
    /// table -> field -> type
    tables: RwLock<HashMap<String, HashMap<String, FieldType>>>,
    /// Serialises DDL so that two requests adding the same field agree on its type.
    ddl: Mutex<()>,
    series: Mutex<HashSet<u64>>,
    /// Raw keys of recorded series, so the parser can skip them (see `series_cache`).
    series_keys: SeriesKeyCache,
}

/// Memory for remembered series keys: about 50 bytes per key, so about 1.3 million series.
const SERIES_KEY_CACHE_BYTES: usize = 64 << 20;

/// The field types a batch needs but a table does not have yet.
pub struct SchemaChange {
    pub table: String,
    pub add: Vec<(String, FieldType)>,
    pub create: bool,
}

pub fn chdb_type(t: FieldType) -> &'static str {
    match t {
        FieldType::Float => "Float64",
        FieldType::Integer => "Int64",
        FieldType::UInteger => "UInt64",
        FieldType::String => "String",
        FieldType::Boolean => "Bool",
    }
}

fn field_type_of(chdb: &str) -> Option<FieldType> {
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
pub const MERGE_SETTINGS: [(&str, u32); 2] = [
    ("merge_selector_base", MERGE_SELECTOR_BASE),
    ("vertical_merge_algorithm_min_columns_to_activate", 1),
];

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
    cols.push(format!("INDEX {}", seq_index_sql()));
    let ttl = match ttl {
        Some(d) => format!(
            " TTL toDateTime(`time`) + toIntervalSecond({})",
            d.as_secs().max(1)
        ),
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

fn series_table_sql() -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {} (`db` String, `measurement` String, `series_id` UInt64, `tags` Map(String, String), `first_seen` DateTime64(9, 'UTC')) ENGINE = ReplacingMergeTree ORDER BY (`db`, `measurement`, `series_id`) {}",
        quote_ident(SERIES_TABLE),
        table_settings()
    )
}

const DATABASES_META: &str = "databases";

impl Catalog {
    /// Loads declared databases, those created at run time (kept in the WAL's metadata), and
    /// every table's columns from chDB.
    pub fn load(engine: Arc<Engine>, cfg: &ServerConfig, wal: &Wal) -> Result<Self, CatalogError> {
        let mut databases = BTreeMap::new();
        if let Some(raw) = wal
            .get_meta(DATABASES_META)
            .map_err(|e| CatalogError::Meta(e.to_string()))?
        {
            let stored: Vec<DatabaseConfig> =
                serde_json::from_slice(&raw).map_err(|e| CatalogError::Meta(e.to_string()))?;
            for d in stored {
                databases.insert(
                    d.name,
                    Database {
                        policies: d.retention_policies,
                    },
                );
            }
        }
        // Declared configuration wins over what was created at run time.
        for d in &cfg.databases {
            databases.insert(
                d.name.clone(),
                Database {
                    policies: d.retention_policies.clone(),
                },
            );
        }
        engine.execute(&series_table_sql())?;
        let out = engine.query(
            "SELECT table, name, type FROM system.columns WHERE database = currentDatabase() ORDER BY table, position",
            OutputFormat::TabSeparated,
        )?;
        let mut tables: HashMap<String, HashMap<String, FieldType>> = HashMap::new();
        let mut with_seq = HashSet::new();
        for line in String::from_utf8_lossy(&out).lines() {
            let mut parts = line.split('\t');
            let (Some(t), Some(n), Some(ty)) = (parts.next(), parts.next(), parts.next()) else {
                continue;
            };
            let t = unescape_tsv(t);
            let n = unescape_tsv(n);
            if n == SEQ_COLUMN {
                with_seq.insert(t);
                continue;
            }
            let entry = tables.entry(t).or_default();
            if n == "time" || n == "series_id" {
                continue;
            }
            if let Some(ft) = field_type_of(ty) {
                entry.insert(n, ft);
            }
        }
        for table in tables.keys() {
            if table != SERIES_TABLE && !with_seq.contains(table) {
                tracing::info!(table, "adding the WAL sequence column");
                for sql in add_seq_column_sql(table) {
                    engine.execute(&sql)?;
                }
            }
        }
        for table in tables_without_merge_policy(&engine)? {
            tracing::info!(table, "adopting the current merge policy");
            engine.execute(&modify_merge_settings_sql(&table))?;
        }
        Ok(Self {
            engine,
            auto_create: cfg.auto_create_databases,
            databases: RwLock::new(databases),
            tables: RwLock::new(tables),
            ddl: Mutex::new(()),
            series: Mutex::new(HashSet::new()),
            series_keys: SeriesKeyCache::new(SERIES_KEY_CACHE_BYTES),
        })
    }

    /// Reads the known series from the dimension table (after replay has flushed it).
    pub fn load_series(&self) -> Result<usize, CatalogError> {
        let out = self.engine.query(
            &format!(
                "SELECT DISTINCT series_id FROM {}",
                quote_ident(SERIES_TABLE)
            ),
            OutputFormat::TabSeparated,
        )?;
        let mut set = self.series.lock().unwrap_or_else(|p| p.into_inner());
        for line in String::from_utf8_lossy(&out).lines() {
            if let Ok(id) = line.trim().parse::<u64>() {
                set.insert(id);
            }
        }
        Ok(set.len())
    }

    pub fn series_count(&self) -> usize {
        self.series.lock().map(|s| s.len()).unwrap_or(0)
    }

    /// Claims the series in `ids` that are new, as long as the total stays within `limit`.
    /// Returns the ids claimed now, and those refused by the limit.
    pub fn claim_series(&self, ids: &[u64], limit: u64) -> (Vec<u64>, HashSet<u64>) {
        let mut set = self.series.lock().unwrap_or_else(|p| p.into_inner());
        let mut claimed = Vec::new();
        let mut refused = HashSet::new();
        for &id in ids {
            if set.contains(&id) {
                continue;
            }
            if set.len() as u64 >= limit {
                refused.insert(id);
                continue;
            }
            set.insert(id);
            claimed.push(id);
        }
        (claimed, refused)
    }

    /// Remembers the raw keys of the series among `keys` that are recorded (or claimed by a
    /// write that is now durable); keys of series refused by the cardinality limit or given
    /// back are skipped, so the parser never trusts a key whose series is not recorded.
    pub fn remember_series_keys(&self, keys: &[(KeyHash, u64)]) {
        if keys.is_empty() {
            return;
        }
        let recorded: Vec<(KeyHash, u64)> = {
            let set = self.series.lock().unwrap_or_else(|p| p.into_inner());
            keys.iter()
                .filter(|(_, id)| set.contains(id))
                .copied()
                .collect()
        };
        self.series_keys.remember(recorded);
    }

    /// Gives back series claimed by a write that did not become durable.
    pub fn release_series(&self, ids: &[u64]) {
        let mut set = self.series.lock().unwrap_or_else(|p| p.into_inner());
        for id in ids {
            set.remove(id);
        }
    }

    pub fn database_names(&self) -> Vec<String> {
        self.databases
            .read()
            .map(|d| d.keys().cloned().collect())
            .unwrap_or_default()
    }

    pub fn policies(&self, db: &str) -> Option<Vec<RetentionPolicyConfig>> {
        self.databases
            .read()
            .ok()
            .and_then(|d| d.get(db).map(|d| d.policies.clone()))
    }

    /// Creates `db` unless it exists, with `policy` as its default policy (InfluxDB's
    /// `autogen`, infinite, when `None`). Returns whether it was created.
    pub fn create_database(
        &self,
        db: &str,
        policy: Option<RetentionPolicyConfig>,
        wal: &Wal,
    ) -> Result<bool, CatalogError> {
        validate_name(db).map_err(|source| CatalogError::BadName {
            name: db.to_string(),
            source,
        })?;
        let mut dbs = self.databases.write().unwrap_or_else(|p| p.into_inner());
        if dbs.contains_key(db) {
            return Ok(false);
        }
        dbs.insert(
            db.to_string(),
            Database {
                policies: vec![policy.unwrap_or_else(RetentionPolicyConfig::autogen)],
            },
        );
        let stored: Vec<DatabaseConfig> = dbs
            .iter()
            .map(|(name, d)| DatabaseConfig {
                name: name.clone(),
                retention_policies: d.policies.clone(),
            })
            .collect();
        let raw = serde_json::to_vec(&stored).map_err(|e| CatalogError::Meta(e.to_string()))?;
        wal.put_meta(DATABASES_META, &raw)
            .map_err(|e| CatalogError::Meta(e.to_string()))?;
        Ok(true)
    }

    /// Resolves `db` and `rp` (empty = the database's default policy) for a write, creating
    /// the database when auto-create is on.
    pub fn resolve(&self, db: &str, rp: &str, wal: &Wal) -> Result<Target, CatalogError> {
        if db.is_empty() {
            return Err(CatalogError::DatabaseNotFound(String::new()));
        }
        let known = self
            .databases
            .read()
            .map(|d| d.contains_key(db))
            .unwrap_or(false);
        if !known {
            if !self.auto_create {
                return Err(CatalogError::DatabaseNotFound(db.to_string()));
            }
            self.create_database(db, None, wal)?;
        }
        let dbs = self.databases.read().unwrap_or_else(|p| p.into_inner());
        let d = dbs
            .get(db)
            .ok_or_else(|| CatalogError::DatabaseNotFound(db.to_string()))?;
        let policy = if rp.is_empty() {
            d.default_policy()
        } else {
            d.policies.iter().find(|p| p.name == rp)
        };
        let policy = policy.ok_or_else(|| CatalogError::RetentionPolicyNotFound {
            db: db.to_string(),
            rp: rp.to_string(),
        })?;
        Ok(Target {
            db: db.to_string(),
            rp: policy.name.clone(),
            ttl: policy.duration.0,
        })
    }

    /// A lookup of the existing field types of `target`'s tables, for the parser.
    pub fn lookup<'a>(&'a self, target: &'a Target) -> TargetLookup<'a> {
        TargetLookup {
            catalog: self,
            target,
        }
    }

    /// Fields of `table` whose type is already fixed.
    pub fn field_type(&self, table: &str, field: &str) -> Option<FieldType> {
        self.tables
            .read()
            .ok()
            .and_then(|t| t.get(table).and_then(|f| f.get(field).copied()))
    }

    /// Creates the table or adds columns as needed for `fields`. Returns, for each field whose
    /// type another write fixed differently in the meantime, that type (the caller drops those
    /// rows).
    pub fn ensure_table(
        &self,
        table: &str,
        ttl: Option<Duration>,
        fields: &[(String, FieldType)],
    ) -> Result<Vec<(String, FieldType)>, CatalogError> {
        // Fast path: everything known and matching.
        {
            let tables = self.tables.read().unwrap_or_else(|p| p.into_inner());
            if let Some(known) = tables.get(table) {
                if fields.iter().all(|(n, t)| known.get(n) == Some(t)) {
                    return Ok(Vec::new());
                }
            }
        }
        let _ddl = self.ddl.lock().unwrap_or_else(|p| p.into_inner());
        let existing = self
            .tables
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(table)
            .cloned();
        let mut conflicts = Vec::new();
        match existing {
            None => {
                self.engine.execute(&create_table_sql(table, ttl, fields))?;
                let mut tables = self.tables.write().unwrap_or_else(|p| p.into_inner());
                tables.insert(table.to_string(), fields.iter().cloned().collect());
            }
            Some(known) => {
                let mut add = Vec::new();
                for (n, t) in fields {
                    match known.get(n) {
                        Some(k) if k == t => {}
                        Some(k) => conflicts.push((n.clone(), *k)),
                        None => add.push((n.clone(), *t)),
                    }
                }
                if !add.is_empty() {
                    let clauses: Vec<String> = add
                        .iter()
                        .map(|(n, t)| {
                            format!(
                                "ADD COLUMN IF NOT EXISTS {} Nullable({})",
                                quote_ident(n),
                                chdb_type(*t)
                            )
                        })
                        .collect();
                    self.engine.execute(&format!(
                        "ALTER TABLE {} {}",
                        quote_ident(table),
                        clauses.join(", ")
                    ))?;
                    let mut tables = self.tables.write().unwrap_or_else(|p| p.into_inner());
                    let entry = tables.entry(table.to_string()).or_default();
                    for (n, t) in add {
                        entry.insert(n, t);
                    }
                }
            }
        }
        Ok(conflicts)
    }

    /// Tables with their active part counts, for metrics.
    pub fn part_counts(&self) -> Result<Vec<(String, i64)>, CatalogError> {
        let out = self.engine.query(
            "SELECT table, count() FROM system.parts WHERE active AND database = currentDatabase() GROUP BY table",
            OutputFormat::TabSeparated,
        )?;
        Ok(String::from_utf8_lossy(&out)
            .lines()
            .filter_map(|l| {
                let (t, n) = l.rsplit_once('\t')?;
                Some((unescape_tsv(t), n.parse().ok()?))
            })
            .collect())
    }
}

/// Undoes TabSeparated escaping of one value.
fn unescape_tsv(s: &str) -> String {
    if !s.contains('\\') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('0') => out.push('\0'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some(o) => out.push(o),
            None => out.push('\\'),
        }
    }
    out
}

pub struct TargetLookup<'a> {
    catalog: &'a Catalog,
    target: &'a Target,
}

impl SchemaLookup for TargetLookup<'_> {
    fn field_type(&self, measurement: &str, field: &str) -> Option<FieldType> {
        let table = table_name(&self.target.db, &self.target.rp, measurement);
        self.catalog.field_type(&table, field)
    }

    fn known_series(&self, _raw_key: &[u8], hash: KeyHash) -> Option<u64> {
        self.catalog.series_keys.get(hash)
    }
}

/// `quote_str` re-exported for SQL built elsewhere in the server.
pub fn sql_string(s: &str) -> String {
    quote_str(s)
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
            sql.contains("TTL toDateTime(`time`) + toIntervalSecond(86400)"),
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
