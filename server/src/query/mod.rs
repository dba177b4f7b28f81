//! InfluxQL on `/query`: statements parsed by `sluice-influxql`, planned into ClickHouse SQL
//! ([`plan`], [`meta`]), run on the read-only query connections within `[query]`'s limits,
//! and their rows cut into InfluxDB 1.x's JSON ([`shape`]). The engine computes; this module
//! resolves names, plans, and shapes.
//!
//! With peers ([`crate::cluster`]) every statement reads the whole tenant: the pods' catalogs
//! united ([`view`]), their series, and each pod's share of a `SELECT` ([`partial`]) merged
//! by this pod's engine ([`gather`]).

pub mod aggregate;
pub mod answer;
pub mod buckets;
mod cardinality;
pub mod chunked;
pub mod cond;
pub mod csv;
mod distinct;
pub mod fetch;
mod forecast;
mod from_subquery;
pub mod functions;
pub mod gather;
mod go_pow;
mod grouping;
mod groups;
mod holt_winters;
mod inline_tags;
mod integral;
pub mod json_text;
pub mod key_regex;
pub mod math;
pub mod meta;
pub mod order_key;
pub mod params;
pub mod partial;
pub mod plan;
mod raw;
mod reads;
pub mod remember;
pub mod select;
mod select_list;
pub mod series_ids;
mod series_limit;
mod series_order;
pub mod shape;
pub mod shapes;
pub mod show;
mod subquery;
mod tail;
pub mod time;
mod top;
pub mod view;

use std::collections::BTreeMap;

use serde_json::{json, Value};
use sluice_core::config::RetentionPolicyConfig;
use sluice_core::FieldType;
use sluice_influxql::{ErrorKind, Measurement, MeasurementName, Statement};

use crate::app::App;
use crate::cluster::Partial;
use crate::engine::Readers;
use answer::Outcome;
use fetch::fetch_on;
pub use fetch::{engine_words, limit_hit, Budget};
use gather::Gather;
use view::View;

/// A measurement's fields and their types.
type Fields = BTreeMap<String, FieldType>;

/// Why a statement cannot be planned: InfluxDB's kind of message, returned as the statement's
/// `error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The query asks for something InfluxDB would refuse too.
    #[error("{0}")]
    Invalid(String),
    /// InfluxDB runs it; sluice does not yet.
    #[error("{0}")]
    Unsupported(String),
}

/// What a `/query` request asks.
pub struct Request<'a> {
    pub q: &'a str,
    pub db: Option<&'a str>,
    pub rp: Option<&'a str>,
    pub epoch: Option<&'a str>,
    /// Answer without the pods that do not answer, instead of failing.
    pub partial: bool,
    /// `params`: values for the query's `$name` parameters (a JSON object, see [`params`]).
    pub params: Option<&'a str>,
}

/// The answer to a request: InfluxDB's `{"results": [...]}` (and the pods left out of it,
/// with `partial=true`), or a parse error, which InfluxDB answers with 400 and
/// `{"error": "error parsing query: ..."}`.
pub enum Answer {
    Results {
        results: Vec<answer::Outcome>,
        missing: Vec<String>,
        /// How each statement's result is cut under `chunked=true`.
        chunking: Vec<chunked::Chunking>,
    },
    ParseError(String),
}

/// What every statement of a request shares.
struct Ctx<'a> {
    app: &'a App,
    req: &'a Request<'a>,
    budget: Budget,
    now_ns: i64,
    /// The databases, policies, measurements and fields the request can name.
    view: View,
    /// The tenant's pods, when this pod gathers.
    gather: Option<Gather<'a>>,
}

impl Ctx<'_> {
    /// Runs `sql` on this pod's data.
    fn fetch(&self, sql: &str) -> Result<shape::Rows, String> {
        fetch_on(self.app, &self.budget, Readers::Local, sql)
    }

    /// Runs the SQL `sql` makes of the series table: this pod's, or the tenant's pods' series
    /// that `what` asks each of them for (one row per series either way when `merged`, see
    /// [`meta::local_series`]; the gathered series are always distinct).
    fn fetch_series(
        &self,
        what: Partial,
        merged: bool,
        sql: &dyn Fn(&str) -> String,
    ) -> Result<shape::Rows, String> {
        match &self.gather {
            None => shape::parse_rows(&fetch::series_output(
                self.app,
                &self.budget,
                &sql(&meta::local_series(merged)),
            )?),
            Some(g) => shape::parse_rows(&g.series_output(
                &self.budget,
                &what,
                meta::SERIES_STRUCTURE,
                &|url| sql(&meta::gathered_series(url)),
            )?),
        }
    }

    /// What pods ask each other for the series a `SHOW` statement lists.
    fn show_series(&self, db: &str, id: usize) -> Partial {
        Partial::Series {
            db: db.to_string(),
            measurement: None,
            q: Some(self.req.q.to_string()),
            params: self.req.params.map(str::to_string),
            statement: id,
            now: self.now_ns,
            every: false,
        }
    }
}

/// Runs every statement of `req.q`, one after another. A pod that has handed a table over
/// since the tenant's catalog was gathered refuses the read (it may have dropped the table);
/// the request then runs once more on a fresh catalog.
pub fn run(app: &App, req: &Request) -> Answer {
    let answer = run_once(app, req);
    let stale = |r: &answer::Outcome| {
        r.error()
            .is_some_and(|e| e.contains(crate::handoff::STALE_VIEW))
    };
    if let Answer::Results { results, .. } = &answer {
        if results.iter().any(stale) {
            app.metrics
                .read_retried(crate::metrics::READ_RETRY_STALE_VIEW);
            app.views.clear();
            return run_once(app, req);
        }
    }
    answer
}

fn run_once(app: &App, req: &Request) -> Answer {
    let parsed = match params::parse(req.q, req.params) {
        Ok(parsed) => parsed,
        Err(e) => return Answer::ParseError(e.to_string()),
    };
    let statements = match parsed {
        Ok(s) => s,
        // InfluxDB reports what it finds when compiling a statement as that statement's error.
        Err(e) if e.kind() == ErrorKind::Compile => {
            return Answer::Results {
                results: vec![Outcome::Value(answer::result_error(0, &e.to_string()))],
                missing: vec![],
                chunking: vec![],
            }
        }
        Err(e) => return Answer::ParseError(format!("error parsing query: {e}")),
    };
    if statements.is_empty() {
        return Answer::ParseError("missing required parameter \"q\"".into());
    }
    let budget = Budget::for_request(&app.cfg.query);
    let gather = Gather::new(app, req.partial);
    let view = match &gather {
        None => Ok(View::local(&app.ingest.catalog)),
        Some(g) => g.view(&budget),
    };
    let ctx = match view {
        Ok(view) => Ctx {
            app,
            req,
            budget,
            now_ns: now_ns(),
            view,
            gather,
        },
        Err(msg) => {
            let results = (0..statements.len())
                .map(|id| Outcome::Value(answer::result_error(id, &msg)))
                .collect();
            return Answer::Results {
                results,
                missing: vec![],
                chunking: vec![],
            };
        }
    };
    let mut results: Vec<Outcome> = statements
        .iter()
        .enumerate()
        .map(|(id, s)| match statement(&ctx, s, id) {
            Ok(v) => v,
            Err(msg) => Outcome::Value(answer::result_error(id, &msg)),
        })
        .collect();
    let missing = ctx.gather.as_ref().map(Gather::missing).unwrap_or_default();
    if !missing.is_empty() {
        let text = format!(
            "partial answer: pod {} of the tenant did not answer, and its data is missing",
            missing.join(", ")
        );
        for r in &mut results {
            r.set_messages(json!([{ "level": "warning", "text": text }]));
        }
    }
    let chunking = statements.iter().map(chunked::Chunking::of).collect();
    Answer::Results {
        results,
        missing,
        chunking,
    }
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

fn with_series(id: usize, series: Vec<Value>) -> Value {
    if series.is_empty() {
        json!({ "statement_id": id })
    } else {
        answer::object([
            ("statement_id", Value::from(id)),
            ("series", Value::Array(series)),
        ])
    }
}

fn statement(ctx: &Ctx, s: &Statement, id: usize) -> Result<Outcome, String> {
    let app = ctx.app;
    let db_of = |explicit: &Option<String>| database(ctx, explicit.as_deref());
    let value = match s {
        Statement::Select(sel) => return select::select(ctx, sel, id),
        Statement::ShowDatabases => Ok(answer::result_databases(id, &ctx.view.database_names())),
        Statement::ShowRetentionPolicies { database } => {
            let db = db_of(database)?;
            let policies = ctx.view.policies(&db).unwrap_or_default();
            Ok(answer::result_policies(id, &policies))
        }
        Statement::CreateDatabase(c) => {
            let rp = c
                .retention_policy
                .as_ref()
                .map(|spec| RetentionPolicyConfig {
                    name: spec.name.clone().unwrap_or_else(|| "autogen".into()),
                    duration: sluice_core::config::RetentionDuration(
                        spec.duration
                            .filter(|d| d.as_nanos() > 0)
                            .map(|d| std::time::Duration::from_nanos(d.as_nanos() as u64)),
                    ),
                    default: true,
                });
            app.ingest
                .catalog
                .create_database(&c.name, rp, &app.ingest.wal)
                .map(|_| answer::result_ok(id))
                .map_err(|e| e.to_string())
        }
        Statement::ShowMeasurements(m) => show::measurements(ctx, m, id),
        Statement::ShowTagKeys(t) => show::tag_keys(ctx, t, id),
        Statement::ShowTagValues(t) => return show::tag_values(ctx, t, id),
        Statement::ShowFieldKeys(f) => show::field_keys(ctx, f, id),
        Statement::ShowSeries(s) => show::series(ctx, s, id),
        Statement::ShowCardinality(c) => cardinality::cardinality(ctx, c, id),
        Statement::Unsupported { kind, .. } => {
            Err(format!("{kind} is not supported by sluice's /query"))
        }
    };
    value.map(Outcome::Value)
}

/// The database a statement reads: its own (`FROM "db"."rp"."m"`, `ON db`) or the request's
/// `db`; an error unless it exists.
fn database(ctx: &Ctx, explicit: Option<&str>) -> Result<String, String> {
    let db = explicit
        .or(ctx.req.db)
        .filter(|d| !d.is_empty())
        .ok_or("database name required")?;
    if ctx.view.policies(db).is_none() {
        return Err(format!("database not found: {db}"));
    }
    Ok(db.to_string())
}

/// The retention policy a source reads in `db`: its own, the request's `rp`, or the default;
/// an error unless `db` has it.
fn policy(ctx: &Ctx, db: &str, explicit: Option<&str>, rp: Option<&str>) -> Result<String, String> {
    let catalog = &ctx.view;
    let rp = explicit
        .or(rp)
        .filter(|r| !r.is_empty())
        .map(str::to_string)
        .or_else(|| catalog.default_policy(db))
        .ok_or_else(|| format!("database not found: {db}"))?;
    if !catalog
        .policies(db)
        .unwrap_or_default()
        .iter()
        .any(|p| p.name == rp)
    {
        return Err(format!("retention policy not found: {rp}"));
    }
    Ok(rp)
}

/// The measurements `sources` name in `db` (and the policy each names, the request's, or the
/// default), with their fields, in name order. No sources: every measurement of the policy.
fn sources_of(
    ctx: &Ctx,
    db: &str,
    rp: Option<&str>,
    sources: &[Measurement],
) -> Result<Vec<(String, Fields)>, String> {
    let catalog = &ctx.view;
    let policy_for = |m: Option<&Measurement>| {
        policy(ctx, db, m.and_then(|m| m.retention_policy.as_deref()), rp)
    };
    let mut out: BTreeMap<String, Fields> = BTreeMap::new();
    if sources.is_empty() {
        return Ok(catalog
            .measurements(db, &policy_for(None)?)
            .into_iter()
            .collect());
    }
    for m in sources {
        let all = catalog.measurements(db, &policy_for(Some(m))?);
        match &m.name {
            MeasurementName::Name(n) => {
                if let Some(f) = all.get(n) {
                    out.insert(n.clone(), f.clone());
                }
            }
            MeasurementName::Regex(re) => {
                for name in matching(ctx, all.keys(), re.as_str())? {
                    if let Some(f) = all.get(&name) {
                        out.insert(name, f.clone());
                    }
                }
            }
        }
    }
    Ok(out.into_iter().collect())
}

/// The names that match `re`, asked of the engine (RE2, as InfluxDB's Go regexes).
fn matching<'a>(
    ctx: &Ctx,
    names: impl Iterator<Item = &'a String>,
    re: &str,
) -> Result<Vec<String>, String> {
    let list: Vec<String> = names.map(|n| sluice_core::names::quote_str(n)).collect();
    if list.is_empty() {
        return Ok(vec![]);
    }
    let rows = ctx.fetch(&format!(
        "SELECT arrayJoin(arrayFilter(x -> match(x, {}), [{}]))",
        sluice_core::names::quote_str(re),
        list.join(", ")
    ))?;
    Ok(rows
        .rows
        .into_iter()
        .filter_map(|r| r.first().and_then(|v| v.as_str().map(str::to_string)))
        .collect())
}
