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
pub mod cond;
pub mod functions;
pub mod gather;
pub mod key_regex;
pub mod meta;
pub mod partial;
pub mod plan;
pub mod shape;
pub mod time;
pub mod view;

use std::collections::BTreeMap;

use serde_json::{json, Value};
use sluice_core::config::RetentionPolicyConfig;
use sluice_core::FieldType;
use sluice_influxql::{
    ErrorKind, Measurement, MeasurementName, SelectStatement, Source as FromSource, Statement,
};

use crate::app::App;
use crate::cluster::Partial;
use crate::engine::{QueryError, Readers};
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
}

/// The answer to a request: InfluxDB's `{"results": [...]}` (and the pods left out of it,
/// with `partial=true`), or a parse error, which InfluxDB answers with 400 and
/// `{"error": "error parsing query: ..."}`.
pub enum Answer {
    Results { body: Value, missing: Vec<String> },
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
    /// that `what` asks each of them for.
    fn fetch_series(
        &self,
        what: Partial,
        sql: &dyn Fn(&str) -> String,
    ) -> Result<shape::Rows, String> {
        match &self.gather {
            None => self.fetch(&sql(&meta::local_series())),
            Some(g) => g.fetch(&self.budget, &|u| {
                sql(&meta::gathered_series(&u.url(
                    &what,
                    "Native",
                    meta::SERIES_STRUCTURE,
                )))
            }),
        }
    }

    /// What pods ask each other for the series a `SHOW` statement lists.
    fn show_series(&self, db: &str, id: usize) -> Partial {
        Partial::Series {
            db: db.to_string(),
            measurement: None,
            q: Some(self.req.q.to_string()),
            statement: id,
            now: self.now_ns,
        }
    }
}

/// Runs every statement of `req.q`, one after another.
pub fn run(app: &App, req: &Request) -> Answer {
    let statements = match sluice_influxql::parse(req.q) {
        Ok(s) => s,
        // InfluxDB reports what it finds when compiling a statement as that statement's error.
        Err(e) if e.kind() == ErrorKind::Compile => {
            return Answer::Results {
                body: json!({ "results": [answer::result_error(0, &e.to_string())] }),
                missing: vec![],
            }
        }
        Err(e) => return Answer::ParseError(format!("error parsing query: {e}")),
    };
    if statements.is_empty() {
        return Answer::ParseError("missing required parameter \"q\"".into());
    }
    let budget = Budget::new(app.cfg.query.max_result_bytes.0);
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
            let results: Vec<Value> = (0..statements.len())
                .map(|id| answer::result_error(id, &msg))
                .collect();
            return Answer::Results {
                body: json!({ "results": results }),
                missing: vec![],
            };
        }
    };
    let mut results: Vec<Value> = statements
        .iter()
        .enumerate()
        .map(|(id, s)| match statement(&ctx, s, id) {
            Ok(v) => v,
            Err(msg) => answer::result_error(id, &msg),
        })
        .collect();
    let missing = ctx.gather.as_ref().map(Gather::missing).unwrap_or_default();
    if !missing.is_empty() {
        let text = format!(
            "partial answer: pod {} of the tenant did not answer, and its data is missing",
            missing.join(", ")
        );
        for r in &mut results {
            r["messages"] = json!([{ "level": "warning", "text": text }]);
        }
    }
    Answer::Results {
        body: json!({ "results": results }),
        missing,
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
        json!({ "statement_id": id, "series": series })
    }
}

fn statement(ctx: &Ctx, s: &Statement, id: usize) -> Result<Value, String> {
    let (app, req, now_ns) = (ctx.app, ctx.req, ctx.now_ns);
    let db_of = |explicit: &Option<String>| database(ctx, explicit.as_deref());
    match s {
        Statement::Select(sel) => select(ctx, sel, id),
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
        Statement::ShowMeasurements(m) => {
            let db = db_of(&m.database)?;
            let sources: Vec<Measurement> = m.with_measurement.iter().cloned().collect();
            let filter = meta::series_filter(&db, &sources, m.condition.as_ref(), now_ns)
                .map_err(|e| e.to_string())?;
            let rows = ctx.fetch_series(ctx.show_series(&db, id), &|from| {
                meta::measurements_sql(from, &filter, m.order, m.limit, m.offset)
            })?;
            let values: Vec<Value> = rows.rows.into_iter().map(Value::Array).collect();
            Ok(with_series(
                id,
                if values.is_empty() {
                    vec![]
                } else {
                    vec![meta::series(Some("measurements"), &["name"], values)]
                },
            ))
        }
        Statement::ShowTagKeys(t) => {
            let db = db_of(&t.database)?;
            let filter = meta::series_filter(&db, &t.sources, t.condition.as_ref(), now_ns)
                .map_err(|e| e.to_string())?;
            let rows = ctx.fetch_series(ctx.show_series(&db, id), &|from| {
                meta::tag_keys_sql(from, &filter)
            })?;
            let mut series = Vec::new();
            for row in rows.rows {
                let (Some(m), Some(Value::Array(keys))) = (row.first(), row.get(1)) else {
                    continue;
                };
                let values: Vec<Value> = keys.iter().map(|k| json!([k])).collect();
                let values = meta::page(values, t.limit, t.offset);
                if !values.is_empty() {
                    series.push(meta::series(m.as_str(), &["tagKey"], values));
                }
            }
            shape::limit_series(&mut series, t.slimit, t.soffset);
            Ok(with_series(id, series))
        }
        Statement::ShowTagValues(t) => {
            let db = db_of(&t.database)?;
            let filter = meta::series_filter(&db, &t.sources, t.condition.as_ref(), now_ns)
                .map_err(|e| e.to_string())?;
            let rows = ctx.fetch_series(ctx.show_series(&db, id), &|from| {
                meta::tag_values_sql(from, &filter, &t.key, t.order)
            })?;
            Ok(with_series(
                id,
                per_measurement(rows.rows, &["key", "value"], t.limit, t.offset),
            ))
        }
        Statement::ShowFieldKeys(f) => {
            let db = db_of(&f.database)?;
            let mut series = Vec::new();
            for (measurement, fields) in sources_of(ctx, &db, req.rp, &f.sources)? {
                let values: Vec<Value> = fields
                    .iter()
                    .map(|(k, t)| json!([k, meta::field_type_name(*t)]))
                    .collect();
                let values = meta::page(values, f.limit, f.offset);
                if !values.is_empty() {
                    series.push(meta::series(
                        Some(&measurement),
                        &["fieldKey", "fieldType"],
                        values,
                    ));
                }
            }
            Ok(with_series(id, series))
        }
        Statement::ShowSeries(s) => {
            let db = db_of(&s.database)?;
            let filter = meta::series_filter(&db, &s.sources, s.condition.as_ref(), now_ns)
                .map_err(|e| e.to_string())?;
            let rows = ctx.fetch_series(ctx.show_series(&db, id), &|from| {
                meta::series_sql(from, &filter)
            })?;
            let mut keys: Vec<String> = rows
                .rows
                .iter()
                .filter_map(|r| {
                    let m = r.first()?.as_str()?;
                    let tags: serde_json::Map<String, Value> =
                        serde_json::from_str(r.get(1)?.as_str()?).ok()?;
                    Some(meta::series_key(m, &tags))
                })
                .collect();
            keys.sort();
            if s.order == Some(sluice_influxql::SortOrder::Descending) {
                keys.reverse();
            }
            let values = meta::page(
                keys.into_iter().map(|k| json!([k])).collect(),
                s.limit,
                s.offset,
            );
            Ok(with_series(
                id,
                if values.is_empty() {
                    vec![]
                } else {
                    vec![meta::series(None, &["key"], values)]
                },
            ))
        }
        Statement::ShowMeasurementCardinality(c) => {
            let db = db_of(&c.database)?;
            let filter = meta::series_filter(&db, &c.sources, c.condition.as_ref(), now_ns)
                .map_err(|e| e.to_string())?;
            let rows = ctx.fetch_series(ctx.show_series(&db, id), &|from| {
                meta::measurement_cardinality_sql(from, &filter)
            })?;
            let n = rows
                .rows
                .first()
                .and_then(|r| r.first())
                .cloned()
                .unwrap_or(json!(0));
            Ok(with_series(
                id,
                vec![meta::series(None, &["count"], vec![json!([n])])],
            ))
        }
        Statement::ShowSeriesCardinality(c) => {
            let db = db_of(&c.database)?;
            let filter = meta::series_filter(&db, &c.sources, c.condition.as_ref(), now_ns)
                .map_err(|e| e.to_string())?;
            let rows = ctx.fetch_series(ctx.show_series(&db, id), &|from| {
                meta::series_cardinality_sql(from, &filter)
            })?;
            if c.exact {
                return Ok(with_series(
                    id,
                    per_measurement(rows.rows, &["count"], c.limit, c.offset),
                ));
            }
            let total: i64 = rows
                .rows
                .iter()
                .filter_map(|r| r.get(1).and_then(Value::as_i64))
                .sum();
            Ok(with_series(
                id,
                vec![meta::series(None, &["count"], vec![json!([total])])],
            ))
        }
        Statement::Unsupported { kind, .. } => {
            Err(format!("{kind} is not supported by sluice's /query"))
        }
    }
}

/// Rows `(measurement, values...)` as a series per measurement.
fn per_measurement(
    rows: Vec<Vec<Value>>,
    columns: &[&str],
    limit: Option<u64>,
    offset: Option<u64>,
) -> Vec<Value> {
    let mut grouped: Vec<(String, Vec<Value>)> = Vec::new();
    for mut row in rows {
        if row.is_empty() {
            continue;
        }
        let m = match row.remove(0) {
            Value::String(s) => s,
            other => other.to_string(),
        };
        match grouped.last_mut() {
            Some((last, values)) if *last == m => values.push(Value::Array(row)),
            _ => grouped.push((m, vec![Value::Array(row)])),
        }
    }
    grouped
        .into_iter()
        .filter_map(|(m, values)| {
            let values = meta::page(values, limit, offset);
            (!values.is_empty()).then(|| meta::series(Some(&m), columns, values))
        })
        .collect()
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

fn select(ctx: &Ctx, sel: &SelectStatement, id: usize) -> Result<Value, String> {
    if sel.fields.is_empty() {
        return Err("at least 1 non-time field must be queried".into());
    }
    let epoch = time::epoch_unit(ctx.req.epoch);
    let mut series = Vec::new();
    for source in &sel.sources {
        let FromSource::Measurement(m) = source else {
            return Err(PlanError::Unsupported(
                "subqueries are not supported by sluice yet".into(),
            )
            .to_string());
        };
        let db = database(ctx, m.database.as_deref())?;
        let rp = policy(ctx, &db, m.retention_policy.as_deref(), ctx.req.rp)?;
        for (measurement, fields) in sources_of(ctx, &db, Some(&rp), std::slice::from_ref(m))? {
            if let Some(conflict) = ctx.view.conflict(&db, &rp, &measurement) {
                return Err(conflict);
            }
            let tag_keys = if needs_tag_keys(sel) {
                tag_keys(ctx, &db, &measurement)?
            } else {
                vec![]
            };
            let one = One {
                db: &db,
                rp: &rp,
                measurement: &measurement,
                fields: &fields,
                tag_keys: &tag_keys,
                statement: id,
            };
            let Some((p, rows)) = (match &ctx.gather {
                None => select_here(ctx, sel, &one)?,
                Some(g) => select_gathered(ctx, g, sel, &one)?,
            }) else {
                continue;
            };
            shape::series(&measurement, &p.columns, p.tagged, rows, epoch, &mut series)?;
        }
    }
    shape::limit_series(&mut series, sel.slimit, sel.soffset);
    Ok(with_series(id, series))
}

/// One measurement a `SELECT` reads.
struct One<'a> {
    db: &'a str,
    rp: &'a str,
    measurement: &'a str,
    fields: &'a Fields,
    tag_keys: &'a [String],
    statement: usize,
}

type Planned = Option<(plan::Plan, shape::Rows)>;

fn select_here(ctx: &Ctx, sel: &SelectStatement, one: &One) -> Result<Planned, String> {
    let table = sluice_core::names::quote_ident(&sluice_core::names::table_name(
        one.db,
        one.rp,
        one.measurement,
    ));
    let src = plan::Source {
        db: one.db,
        measurement: one.measurement,
        table: &table,
        fields: one.fields,
        tag_keys: one.tag_keys,
    };
    let Some(p) =
        plan::plan(sel, &src, ctx.now_ns, plan::Mode::Whole).map_err(|e| e.to_string())?
    else {
        return Ok(None);
    };
    let rows = ctx.fetch(&p.sql)?;
    Ok(Some((p, rows)))
}

/// Every pod computes its share ([`partial`]); this pod's engine reads them all and finishes.
/// The columns the pods send are those of this pod's own share, which reads the tenant's
/// field types whatever this pod holds.
fn select_gathered(
    ctx: &Ctx,
    g: &Gather,
    sel: &SelectStatement,
    one: &One,
) -> Result<Planned, String> {
    let Some(own) = partial::select_sql(
        ctx.app,
        sel,
        one.db,
        one.rp,
        one.measurement,
        one.fields,
        one.tag_keys,
        ctx.now_ns,
    )?
    else {
        return Ok(None);
    };
    let columns = fetch_as(
        ctx.app,
        &ctx.budget,
        Readers::Local,
        &format!("DESCRIBE TABLE ({own})"),
        false,
    )?;
    let structure = gather::structure_of(&columns);
    let what = Partial::Select {
        q: ctx.req.q.to_string(),
        statement: one.statement,
        db: one.db.to_string(),
        rp: one.rp.to_string(),
        measurement: one.measurement.to_string(),
        fields: partial::type_names(one.fields),
        tag_keys: one.tag_keys.to_vec(),
        now: ctx.now_ns,
    };
    let src = plan::Source {
        db: one.db,
        measurement: one.measurement,
        table: "",
        fields: one.fields,
        tag_keys: one.tag_keys,
    };
    let Some(p) =
        plan::plan(sel, &src, ctx.now_ns, plan::Mode::Final("")).map_err(|e| e.to_string())?
    else {
        return Ok(None);
    };
    let rows = g.fetch(&ctx.budget, &|u| {
        let url = u.url(&what, "Native", &structure);
        // Planned just above with another source: it plans again the same way.
        plan::plan(sel, &src, ctx.now_ns, plan::Mode::Final(&url))
            .ok()
            .flatten()
            .map(|p| p.sql)
            .unwrap_or_default()
    })?;
    Ok(Some((p, rows)))
}

fn needs_tag_keys(sel: &SelectStatement) -> bool {
    let grouped = sel.group_by.iter().any(|d| {
        matches!(
            d,
            sluice_influxql::Dimension::Wildcard | sluice_influxql::Dimension::Regex(_)
        )
    });
    grouped
        || sel.fields.iter().any(|f| {
            matches!(
                f.expr,
                sluice_influxql::Expr::Wildcard(_)
                    | sluice_influxql::Expr::Literal(sluice_influxql::Literal::Regex(_))
            )
        })
}

/// The tag keys of `measurement`'s series (in every pod when gathering), for `*`.
fn tag_keys(ctx: &Ctx, db: &str, measurement: &str) -> Result<Vec<String>, String> {
    let filter = format!(
        "db = {} AND measurement = {}",
        sluice_core::names::quote_str(db),
        sluice_core::names::quote_str(measurement)
    );
    let what = Partial::Series {
        db: db.to_string(),
        measurement: Some(measurement.to_string()),
        q: None,
        statement: 0,
        now: ctx.now_ns,
    };
    let rows = ctx.fetch_series(what, &|from| meta::tag_keys_sql(from, &filter))?;
    Ok(rows
        .rows
        .first()
        .and_then(|r| r.get(1))
        .and_then(Value::as_array)
        .map(|keys| {
            keys.iter()
                .filter_map(|k| k.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default())
}

/// What is left of a request's `query.max_result_bytes`: the rows of every query a request
/// runs (several statements, a regex over many measurements) count against one bound.
pub struct Budget {
    max: u64,
    left: std::cell::Cell<u64>,
}

impl Budget {
    pub fn new(max: u64) -> Self {
        Self {
            max,
            left: std::cell::Cell::new(max),
        }
    }
}

/// Runs `sql` on a query connection of `readers` and parses its rows, within what is left of
/// the request's `query.max_result_bytes` (the engine enforces it too, per query).
fn fetch_on(
    app: &App,
    budget: &Budget,
    readers: Readers,
    sql: &str,
) -> Result<shape::Rows, String> {
    fetch_as(app, budget, readers, sql, true)
}

/// [`fetch_on`] for statements the engine does not stream (`DESCRIBE`).
fn fetch_as(
    app: &App,
    budget: &Budget,
    readers: Readers,
    sql: &str,
    streamed: bool,
) -> Result<shape::Rows, String> {
    let q = &app.cfg.query;
    let (max, left) = (budget.max, budget.left.get());
    let mut out: Vec<u8> = Vec::new();
    let mut over = false;
    let mut sink = |chunk: Vec<u8>| {
        if (out.len() + chunk.len()) as u64 > left {
            over = true;
            return false;
        }
        out.extend_from_slice(&chunk);
        true
    };
    let sql = format!("{sql} FORMAT JSONCompactEachRowWithNamesAndTypes");
    app.engine
        .stream_on(readers, &sql, streamed, q.queue_timeout, &mut sink)
        .map_err(|e| match e {
            QueryError::Busy(n) => format!(
                "all {n} query connections are busy for longer than query.queue_timeout; retry"
            ),
            QueryError::Engine(msg) => match limit_hit(&app.cfg.query, &msg) {
                Some(limit) => format!("query stopped: it exceeded {limit}: {msg}"),
                None => msg,
            },
        })?;
    if over {
        return Err(format!(
            "the answer is larger than query.max_result_bytes ({max} bytes, for all the statements of a request together): narrow the time range, add a LIMIT or a coarser GROUP BY time"
        ));
    }
    budget.left.set(left - out.len() as u64);
    shape::parse_rows(&out)
}

/// The `[query]` limit an engine error reports hitting, named as in the config file.
pub fn limit_hit(q: &sluice_core::config::QueryConfig, msg: &str) -> Option<String> {
    if msg.contains("TIMEOUT_EXCEEDED") {
        Some(format!(
            "query.timeout ({})",
            sluice_core::config::format_duration(q.timeout)
        ))
    } else if msg.contains("MEMORY_LIMIT_EXCEEDED") {
        Some(format!("query.max_memory_bytes ({})", q.max_memory_bytes))
    } else if msg.contains("TOO_MANY_ROWS_OR_BYTES") {
        Some(format!("query.max_result_bytes ({})", q.max_result_bytes))
    } else if msg.contains("TOO_MANY_ROWS") {
        Some(format!("query.max_rows_to_read ({})", q.max_rows_to_read))
    } else {
        None
    }
}
