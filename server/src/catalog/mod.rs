//! What exists: databases and their retention policies, tables and their field types, and the
//! series seen so far.
//!
//! Schema changes (a new table, a new field) are applied to chDB before the write that brings
//! them is acknowledged, so that a flush never meets a column that does not exist and a
//! restart can rebuild this catalog from chDB alone.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use chdb_rust::format::OutputFormat;
use sluice_core::config::{DatabaseConfig, RetentionPolicyConfig};
use sluice_core::names::{quote_ident, quote_str, table_name, validate_name, NameError};
use sluice_core::{FieldType, KeyHash, SchemaLookup};

use crate::engine::{Engine, EngineError};
use crate::series_cache::SeriesKeyCache;
use crate::wal::Wal;

pub mod ddl;
mod load;
mod series;

pub use ddl::{
    add_origin_column_sql, add_seq_column_sql, chdb_type, create_table_sql,
    modify_merge_settings_sql, modify_ttl_sql, tables_without_merge_policy, ttl_sql,
    MERGE_SELECTOR_BASE, MERGE_SETTINGS, ORIGIN_COLUMN, SEQ_COLUMN,
};
use series::SeriesIndex;

/// The dimension table holding one row per series.
pub const SERIES_TABLE: &str = "sluice_series";

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
    #[error("max-databases limit exceeded: the server holds {limit} databases; {name:?} would be one more")]
    TooManyDatabases { name: String, limit: u32 },
    #[error("max-measurements limit exceeded: database {db:?}, retention policy {rp:?} has {limit} measurements")]
    TooManyMeasurements { db: String, rp: String, limit: u32 },
}

/// What a write's fields met in their table.
#[derive(Debug, Default)]
pub struct TableCheck {
    /// Fields whose type another write fixed differently, with that type (the caller drops
    /// the rows that set them).
    pub conflicts: Vec<(String, FieldType)>,
    /// New fields the table has no room for under `max_fields_per_measurement`.
    pub over_field_limit: Vec<String>,
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
    /// Scope of the database's series keys in the key cache ([`KeyHash::scoped`]).
    pub key_scope: KeyHash,
}

pub struct Catalog {
    engine: Arc<Engine>,
    auto_create: bool,
    limits: sluice_core::config::LimitsConfig,
    databases: RwLock<BTreeMap<String, Database>>,
    /// table -> field -> type
    tables: RwLock<HashMap<String, HashMap<String, FieldType>>>,
    /// Serialises DDL so that two requests adding the same field agree on its type.
    ddl: Mutex<()>,
    /// The series recorded per database: a series written to two databases has a row in the
    /// series table for each.
    series: Mutex<SeriesIndex>,
    /// Raw keys of recorded series, so the parser can skip them (see `series_cache`), each
    /// scoped by its database.
    series_keys: SeriesKeyCache,
}

/// The field types a batch needs but a table does not have yet.
pub struct SchemaChange {
    pub table: String,
    pub add: Vec<(String, FieldType)>,
    pub create: bool,
}

const DATABASES_META: &str = "databases";

impl Catalog {
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

    /// The measurements of `db`'s policy `rp` that have a table, with their fields: what a
    /// read of that policy can find.
    pub fn measurements(
        &self,
        db: &str,
        rp: &str,
    ) -> BTreeMap<String, BTreeMap<String, FieldType>> {
        let dbs = self.databases.read().unwrap_or_else(|p| p.into_inner());
        let prefix = table_name(db, rp, "");
        self.tables
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(t, _)| t.starts_with(&prefix) && policy_of(t, &dbs) == Some((db, rp)))
            .map(|(t, fields)| {
                (
                    t[prefix.len()..].to_string(),
                    fields.iter().map(|(k, v)| (k.clone(), *v)).collect(),
                )
            })
            .collect()
    }

    /// The default policy of `db`, if the database exists.
    pub fn default_policy(&self, db: &str) -> Option<String> {
        let dbs = self.databases.read().unwrap_or_else(|p| p.into_inner());
        dbs.get(db)
            .and_then(|d| d.default_policy())
            .map(|p| p.name.clone())
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
        if dbs.len() >= self.limits.max_databases as usize {
            return Err(CatalogError::TooManyDatabases {
                name: db.to_string(),
                limit: self.limits.max_databases,
            });
        }
        let new = Database {
            policies: vec![policy.unwrap_or_else(RetentionPolicyConfig::autogen)],
        };
        // Stored first, then known: a database whose record failed to persist is not used by
        // writes that would then vanish with it at the next start.
        let stored: Vec<DatabaseConfig> = dbs
            .iter()
            .chain(std::iter::once((&db.to_string(), &new)))
            .map(|(name, d)| DatabaseConfig {
                name: name.clone(),
                retention_policies: d.policies.clone(),
            })
            .collect();
        let raw = serde_json::to_vec(&stored).map_err(|e| CatalogError::Meta(e.to_string()))?;
        wal.put_meta(DATABASES_META, &raw)
            .map_err(|e| CatalogError::Meta(e.to_string()))?;
        dbs.insert(db.to_string(), new);
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
            key_scope: KeyHash::of(db.as_bytes()),
        })
    }

    /// A lookup of the existing field types of `target`'s tables, for the parser.
    pub fn lookup<'a>(&'a self, target: &'a Target) -> TargetLookup<'a> {
        TargetLookup {
            catalog: self,
            target,
        }
    }

    /// Drops `table` and forgets it (a decommissioned pod, once the pod receiving the table
    /// holds it). `SYNC`: its parts leave the disk before this returns.
    pub fn drop_table(&self, table: &str) -> Result<(), CatalogError> {
        let _ddl = self.ddl.lock().unwrap_or_else(|p| p.into_inner());
        self.engine
            .execute(&format!("DROP TABLE IF EXISTS {} SYNC", quote_ident(table)))?;
        self.tables
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(table);
        Ok(())
    }

    /// Every measurement table with its database, policy and measurement.
    pub fn measurement_tables(&self) -> Vec<(String, String, String, String)> {
        let policies: Vec<(String, String)> = {
            let dbs = self.databases.read().unwrap_or_else(|p| p.into_inner());
            dbs.iter()
                .flat_map(|(db, d)| d.policies.iter().map(|p| (db.clone(), p.name.clone())))
                .collect()
        };
        let mut out = Vec::new();
        for (db, rp) in policies {
            for m in self.measurements(&db, &rp).into_keys() {
                out.push((table_name(&db, &rp, &m), db.clone(), rp.clone(), m));
            }
        }
        out
    }

    /// The fields of `table` and their types; `None` when this pod has no such table.
    pub fn table_fields(&self, table: &str) -> Option<BTreeMap<String, FieldType>> {
        let tables = self.tables.read().unwrap_or_else(|p| p.into_inner());
        tables
            .get(table)
            .map(|f| f.iter().map(|(k, v)| (k.clone(), *v)).collect())
    }

    pub fn field_type(&self, table: &str, field: &str) -> Option<FieldType> {
        self.tables
            .read()
            .ok()
            .and_then(|t| t.get(table).and_then(|f| f.get(field).copied()))
    }

    /// Creates the table of `target`'s `measurement` or adds columns as needed for `fields`,
    /// within the schema limits. A new table over `max_measurements_per_database` is an error
    /// (the caller drops its lines); fields over `max_fields_per_measurement` and fields whose
    /// type another write fixed differently in the meantime are reported for their rows.
    pub fn ensure_table(
        &self,
        target: &Target,
        table: &str,
        fields: &[(String, FieldType)],
    ) -> Result<TableCheck, CatalogError> {
        let ttl = target.ttl;
        // Fast path: everything known and matching.
        {
            let tables = self.tables.read().unwrap_or_else(|p| p.into_inner());
            if let Some(known) = tables.get(table) {
                if fields.iter().all(|(n, t)| known.get(n) == Some(t)) {
                    return Ok(TableCheck::default());
                }
            }
        }
        let max_fields = self.limits.max_fields_per_measurement as usize;
        let _ddl = self.ddl.lock().unwrap_or_else(|p| p.into_inner());
        let existing = self
            .tables
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(table)
            .cloned();
        let mut check = TableCheck::default();
        match existing {
            None => {
                self.check_measurement_room(target)?;
                let (fields, over) = fields.split_at(fields.len().min(max_fields));
                check.over_field_limit = over.iter().map(|(n, _)| n.clone()).collect();
                self.engine.execute(&create_table_sql(table, ttl, fields))?;
                let mut tables = self.tables.write().unwrap_or_else(|p| p.into_inner());
                tables.insert(table.to_string(), fields.iter().cloned().collect());
            }
            Some(known) => {
                let mut add = Vec::new();
                for (n, t) in fields {
                    match known.get(n) {
                        Some(k) if k == t => {}
                        Some(k) => check.conflicts.push((n.clone(), *k)),
                        None if known.len() + add.len() >= max_fields => {
                            check.over_field_limit.push(n.clone())
                        }
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
        Ok(check)
    }

    /// Refuses a new table when `target`'s policy already has the most measurements allowed
    /// (counted by table-name prefix; called under the DDL lock).
    fn check_measurement_room(&self, target: &Target) -> Result<(), CatalogError> {
        let limit = self.limits.max_measurements_per_database;
        let dbs = self.databases.read().unwrap_or_else(|p| p.into_inner());
        let count = self
            .tables
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .filter(|t| policy_of(t, &dbs).is_some_and(|(d, r)| d == target.db && r == target.rp))
            .count();
        if count >= limit as usize {
            return Err(CatalogError::TooManyMeasurements {
                db: target.db.clone(),
                rp: target.rp.clone(),
                limit,
            });
        }
        Ok(())
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

/// The database and retention policy a table belongs to: the one whose `<db>_<rp>_` prefix it
/// starts with, the longest when several do (names may hold `_`: the tables of policy
/// `raw_archive` also start with the prefix of policy `raw`).
fn policy_of<'a>(
    table: &str,
    databases: &'a BTreeMap<String, Database>,
) -> Option<(&'a str, &'a str)> {
    databases
        .iter()
        .flat_map(|(db, d)| {
            d.policies
                .iter()
                .map(move |p| (db.as_str(), p.name.as_str()))
        })
        .filter(|(db, rp)| table.starts_with(&table_name(db, rp, "")))
        .max_by_key(|(db, rp)| db.len() + rp.len())
}

/// Undoes TabSeparated escaping of one value.
pub(crate) fn unescape_tsv(s: &str) -> String {
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
        self.catalog
            .series_keys
            .get(hash.scoped(self.target.key_scope))
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
    fn a_table_belongs_to_the_longest_matching_policy() {
        let policy = |name: &str| RetentionPolicyConfig {
            name: name.into(),
            ..RetentionPolicyConfig::autogen()
        };
        let dbs: BTreeMap<String, Database> = [(
            "d".to_string(),
            Database {
                policies: vec![policy("raw"), policy("raw_archive")],
            },
        )]
        .into();
        assert_eq!(policy_of("d_raw_cpu", &dbs), Some(("d", "raw")));
        assert_eq!(
            policy_of("d_raw_archive_cpu", &dbs),
            Some(("d", "raw_archive"))
        );
        assert_eq!(policy_of("e_raw_cpu", &dbs), None);
    }
}
