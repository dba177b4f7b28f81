//! A catalog rebuilt from chDB and the WAL's metadata at start-up: tables made by an earlier
//! version are brought to today's columns, merge policy and retention.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

use chdb_rust::format::OutputFormat;
use sluice_core::config::{DatabaseConfig, ServerConfig};
use sluice_core::FieldType;

use super::ddl::{field_type_of, series_table_sql, table_ttls};
use super::series::{SeriesIndex, SERIES_KEY_CACHE_BYTES};
use super::{
    add_origin_column_sql, add_seq_column_sql, modify_merge_settings_sql, modify_ttl_sql,
    policy_of, tables_without_merge_policy, ttl_sql, unescape_tsv, Catalog, CatalogError, Database,
    DATABASES_META, ORIGIN_COLUMN, SEQ_COLUMN, SERIES_TABLE,
};
use crate::engine::Engine;
use crate::series_cache::SeriesKeyCache;
use crate::wal::Wal;

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
        let mut with_origin = HashSet::new();
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
            if n == ORIGIN_COLUMN {
                with_origin.insert(t);
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
            if table != SERIES_TABLE && !with_origin.contains(table) {
                for sql in add_origin_column_sql(table) {
                    engine.execute(&sql)?;
                }
            }
        }
        for table in tables_without_merge_policy(&engine)? {
            tracing::info!(table, "adopting the current merge policy");
            engine.execute(&modify_merge_settings_sql(&table))?;
        }
        sync_ttls(&engine, &databases)?;
        Ok(Self {
            engine,
            auto_create: cfg.auto_create_databases,
            limits: cfg.limits.clone(),
            databases: RwLock::new(databases),
            tables: RwLock::new(tables),
            ddl: Mutex::new(()),
            series: Mutex::new(SeriesIndex::default()),
            series_keys: SeriesKeyCache::new(SERIES_KEY_CACHE_BYTES),
        })
    }
}

/// Gives every existing table of a declared retention policy that policy's duration as its TTL:
/// a table's TTL is set when it is created, so without this a policy shortened from `30d` to
/// `7d` would keep 30 days in every table that already existed. Changing the TTL makes the
/// engine drop the rows it now expires in the background.
fn sync_ttls(engine: &Engine, databases: &BTreeMap<String, Database>) -> Result<(), CatalogError> {
    for (table, ttl) in table_ttls(engine)? {
        let Some((db, rp)) = policy_of(&table, databases) else {
            continue;
        };
        let Some(policy) = databases
            .get(db)
            .and_then(|d| d.policies.iter().find(|p| p.name == rp))
        else {
            continue;
        };
        let want = ttl_sql(policy.duration.0);
        if ttl != want {
            tracing::info!(table, from = %ttl, to = %want, "retention policy changed: updating the table's TTL");
            engine.execute(&modify_ttl_sql(&table, policy.duration.0))?;
        }
    }
    Ok(())
}
