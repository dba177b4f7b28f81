//! `SELECT`: per measurement, planned and run on this pod, or gathered from every pod of the
//! tenant ([`super::partial`], [`super::gather`]).

use std::collections::BTreeMap;

use serde_json::Value;
use sluice_influxql::{Measurement, SelectStatement, Source as FromSource};

use super::answer::Outcome;
use super::fetch::{fetch_as, output_with};
use super::gather::{self, Gather};
use super::{database, meta, partial, plan, policy, shape, sources_of, time, Ctx, Fields};
use crate::cluster::Partial;
use crate::engine::Readers;

pub(super) fn select(ctx: &Ctx, sel: &SelectStatement, id: usize) -> Result<Outcome, String> {
    if sel.fields.is_empty() {
        return Err("at least 1 non-time field must be queried".into());
    }
    if let Some(call) = super::holt_winters::call(sel).map_err(|e| e.to_string())? {
        return super::holt_winters::select(ctx, sel, &call, id);
    }
    let epoch = time::epoch_unit(ctx.req.epoch);
    let text = Statement {
        q: ctx.req.q,
        params: ctx.req.params,
        index: id,
        ordered_sums: false,
    };
    let mut series = Vec::new();
    // Each measurement's groups of series, which `SLIMIT` and `SOFFSET` count.
    let mut groups = BTreeMap::new();
    let limits = sel.slimit.is_some() || sel.soffset.is_some();
    let mut measurements = Vec::new();
    for source in &sel.sources {
        match source {
            FromSource::Measurement(m) => measurements.push(m),
            FromSource::Subquery(inner) => {
                super::from_subquery::select(ctx, sel, inner, epoch, &mut series)?;
            }
        }
    }
    let resolved = resolve_all(ctx, sel, &measurements)?;
    // Over several measurements a wildcard stands for the keys of all of them; the pods then
    // plan the statement as written out, from its text.
    let expanded = if resolved.len() > 1 {
        let over: Vec<_> = resolved
            .iter()
            .map(|r| (&r.fields, r.tag_keys.as_slice()))
            .collect();
        super::select_list::expand_over(sel, &over).map_err(|e| e.to_string())?
    } else {
        None
    };
    let expanded_text = expanded.as_ref().map(|e| e.to_string());
    let (sel, text) = match (&expanded, &expanded_text) {
        (Some(e), Some(q)) => (
            e,
            Statement {
                q,
                params: None,
                index: 0,
                ordered_sums: false,
            },
        ),
        _ => (sel, text),
    };
    rows_of(ctx, sel, resolved, &text, &mut |name, p, rows| {
        if let (true, Some(g)) = (limits, &p.groups) {
            groups.insert(name.to_string(), groups_of(ctx, g, id)?);
        }
        shape::series(name, &p.columns, p.tagged, rows, epoch, &mut series)
    })?;
    Ok(outcome_of(sel, id, series, &groups))
}

/// The keys of the groups `g` lists (in every pod when gathering).
fn groups_of(
    ctx: &Ctx,
    g: &super::series_limit::GroupSource,
    id: usize,
) -> Result<Vec<String>, String> {
    let what = Partial::Series {
        db: g.db.clone(),
        measurement: Some(g.measurement.clone()),
        q: None,
        params: None,
        statement: id,
        now: ctx.now_ns,
        every: true,
    };
    let rows = ctx.fetch_series(what, false, &|from| g.sql(from))?;
    Ok(rows
        .rows
        .iter()
        .filter_map(|r| r.first().and_then(Value::as_str))
        .map(super::series_limit::key_of)
        .collect())
}

/// Statement `id`'s answer: its `series`, within its `SLIMIT` and `SOFFSET`, the series
/// answered counting as the groups.
pub(super) fn outcome(sel: &SelectStatement, id: usize, series: Vec<Vec<u8>>) -> Outcome {
    outcome_of(sel, id, series, &BTreeMap::new())
}

/// [`outcome`], with each measurement's `groups` where they are known.
fn outcome_of(
    sel: &SelectStatement,
    id: usize,
    mut series: Vec<Vec<u8>>,
    groups: &BTreeMap<String, Vec<String>>,
) -> Outcome {
    let descending = sel.order == Some(sluice_influxql::SortOrder::Descending);
    super::series_order::in_influx_order(&mut series, descending);
    super::series_limit::limit_tag_sets(&mut series, sel.slimit, sel.soffset, groups);
    Outcome::Series {
        id,
        series,
        messages: None,
    }
}

/// What is done with the rows of one measurement: its name, its plan and its rows.
pub(super) type EachRows<'a> = dyn FnMut(&str, &plan::Plan, shape::Rows) -> Result<(), String> + 'a;

/// `sel` over each measurement `sources` name, planned here or gathered from every pod (which
/// read the statement from `text`), its rows handed to `each`. The measurements come in the
/// order InfluxDB answers their series, by name (backwards under `ORDER BY time DESC`),
/// whatever the order of `FROM`.
pub(super) fn measurement_rows(
    ctx: &Ctx,
    sel: &SelectStatement,
    sources: &[&Measurement],
    text: &Statement,
    each: &mut EachRows,
) -> Result<(), String> {
    rows_of(ctx, sel, resolve_all(ctx, sel, sources)?, text, each)
}

/// The measurements `sources` name, in the order InfluxDB answers their series.
fn resolve_all(
    ctx: &Ctx,
    sel: &SelectStatement,
    sources: &[&Measurement],
) -> Result<Vec<Resolved>, String> {
    let mut all = Vec::new();
    for m in sources {
        all.extend(resolve(ctx, sel, m)?);
    }
    all.sort_by(|a, b| a.name.cmp(&b.name));
    if sel.order == Some(sluice_influxql::SortOrder::Descending) {
        all.reverse();
    }
    Ok(all)
}

/// [`measurement_rows`] over measurements already resolved.
fn rows_of(
    ctx: &Ctx,
    sel: &SelectStatement,
    all: Vec<Resolved>,
    text: &Statement,
    each: &mut EachRows,
) -> Result<(), String> {
    for found in all {
        let one = One {
            ordered_sums: text.ordered_sums,
            ..found.one()
        };
        let Some((p, rows)) = (match &ctx.gather {
            None => select_here(ctx, sel, &one)?,
            Some(g) => select_gathered(ctx, g, sel, &one, text)?,
        }) else {
            continue;
        };
        each(&found.name, &p, rows)?;
    }
    Ok(())
}

/// A measurement a `SELECT` reads, resolved: its database, policy, fields and (when the
/// statement needs them for `*`) tag keys.
pub(super) struct Resolved {
    pub(super) db: String,
    pub(super) rp: String,
    pub(super) name: String,
    pub(super) fields: Fields,
    pub(super) tag_keys: Vec<String>,
}

impl Resolved {
    pub(super) fn one(&self) -> One<'_> {
        One {
            db: &self.db,
            rp: &self.rp,
            measurement: &self.name,
            fields: &self.fields,
            tag_keys: &self.tag_keys,
            ordered_sums: false,
        }
    }
}

/// The measurements `m` names for `sel` (a name, or every one a regex matches); an error when
/// one has conflicting field types across the tenant.
pub(super) fn resolve(
    ctx: &Ctx,
    sel: &SelectStatement,
    m: &Measurement,
) -> Result<Vec<Resolved>, String> {
    let db = database(ctx, m.database.as_deref())?;
    let rp = policy(ctx, &db, m.retention_policy.as_deref(), ctx.req.rp)?;
    let mut out = Vec::new();
    for (name, fields) in sources_of(ctx, &db, Some(&rp), std::slice::from_ref(m))? {
        if let Some(conflict) = ctx.view.conflict(&db, &rp, &name) {
            return Err(conflict);
        }
        let tag_keys = if needs_tag_keys(sel) {
            tag_keys(ctx, &db, &name)?
        } else {
            vec![]
        };
        out.push(Resolved {
            db: db.clone(),
            rp: rp.clone(),
            name,
            fields,
            tag_keys,
        });
    }
    Ok(out)
}

/// One measurement a `SELECT` reads.
pub(super) struct One<'a> {
    pub(super) db: &'a str,
    pub(super) rp: &'a str,
    pub(super) measurement: &'a str,
    pub(super) fields: &'a Fields,
    pub(super) tag_keys: &'a [String],
    /// See [`plan::Source::ordered_sums`].
    pub(super) ordered_sums: bool,
}

type Planned = Option<(plan::Plan, shape::Rows)>;

fn select_here(ctx: &Ctx, sel: &SelectStatement, one: &One) -> Result<Planned, String> {
    let Some(p) = plan_here(ctx, sel, one)? else {
        return Ok(None);
    };
    let settings = p.read_settings();
    let out = output_with(
        ctx.app,
        &ctx.budget,
        Readers::Local,
        &settings,
        &p.sql,
        true,
    )?;
    let rows = shape::parse_rows(&out)?;
    Ok(Some((p, rows)))
}

/// `sel` planned over this pod's data alone.
pub(super) fn plan_here(
    ctx: &Ctx,
    sel: &SelectStatement,
    one: &One,
) -> Result<Option<plan::Plan>, String> {
    let name = sluice_core::names::table_name(one.db, one.rp, one.measurement);
    // Answering alone: rows received in a hand-off not yet settled do not count.
    let Some(table) = ctx
        .app
        .handoff
        .counted_source(&name, &crate::handoff::Handed::new())?
    else {
        return Ok(None);
    };
    let src = plan::Source {
        db: one.db,
        measurement: one.measurement,
        table: &table,
        fields: one.fields,
        tag_keys: one.tag_keys,
        series: None,
        series_ids: None,
        series_tags: None,
        ordered_sums: one.ordered_sums,
    };
    super::series_ids::plan_reading(ctx.app, sel, &src, ctx.now_ns, plan::Mode::Whole)
        .map_err(|e| e.to_string())
}

/// Every pod computes its share ([`partial`]); this pod's engine reads them all and finishes.
fn select_gathered(
    ctx: &Ctx,
    g: &Gather,
    sel: &SelectStatement,
    one: &One,
    text: &Statement,
) -> Result<Planned, String> {
    let src = final_source(one);
    let Some(p) =
        plan::plan(sel, &src, ctx.now_ns, plan::Mode::Final("")).map_err(|e| e.to_string())?
    else {
        return Ok(None);
    };
    let rows = gathered(ctx, g, sel, one, text, p.one_thread, &|sql| {
        Some(sql.into())
    })?;
    Ok(rows.map(|rows| (p, rows)))
}

/// Where the pods read a statement from: the request's text and its index there.
pub(super) struct Statement<'a> {
    pub(super) q: &'a str,
    /// The request's `params`, bound in `q`.
    pub(super) params: Option<&'a str>,
    pub(super) index: usize,
    /// See [`plan::Source::ordered_sums`].
    pub(super) ordered_sums: bool,
}

/// The plan source of a gathering pod's part (its table is the pods' shares).
pub(super) fn final_source<'a>(one: &One<'a>) -> plan::Source<'a> {
    plan::Source {
        db: one.db,
        measurement: one.measurement,
        table: "",
        fields: one.fields,
        tag_keys: one.tag_keys,
        series: None,
        series_ids: None,
        series_tags: None,
        ordered_sums: one.ordered_sums,
    }
}

/// The rows of `finish(sql)`, where `sql` is the gathering pod's part of `sel` over every
/// pod's share. The columns the pods send are those of this pod's own share, which reads the
/// tenant's field types whatever this pod holds.
pub(super) fn gathered(
    ctx: &Ctx,
    g: &Gather,
    sel: &SelectStatement,
    one: &One,
    text: &Statement,
    one_thread: bool,
    finish: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<shape::Rows>, String> {
    let Some(own) = share(ctx, sel, one, plan::Mode::Shape)? else {
        return Ok(None);
    };
    let structure = ctx.app.shapes.structure(&own.sql, || {
        let columns = fetch_as(
            ctx.app,
            &ctx.budget,
            Readers::Local,
            &format!("DESCRIBE TABLE ({})", own.sql),
            false,
        )?;
        Ok(gather::Structure::of(&columns))
    })?;
    let what = Partial::Select {
        q: text.q.to_string(),
        params: text.params.map(str::to_string),
        statement: text.index,
        db: one.db.to_string(),
        rp: one.rp.to_string(),
        measurement: one.measurement.to_string(),
        fields: partial::type_names(one.fields),
        tag_keys: one.tag_keys.to_vec(),
        now: ctx.now_ns,
        handed: crate::handoff::to_pairs(ctx.view.handed()),
        ordered_sums: one.ordered_sums,
    };
    let changes = ctx.app.handoff.changes();
    let own = own_share(ctx, g, sel, one)?;
    let src = final_source(one);
    let rows = g.fetch_on_threads(&ctx.budget, one_thread, &|u| {
        let url = u.url_with_own(&what, &structure, own.as_deref());
        // Planned before with another source: it plans again the same way.
        plan::plan(sel, &src, ctx.now_ns, plan::Mode::Final(&url))
            .ok()
            .flatten()
            .and_then(|p| finish(&p.sql))
            .unwrap_or_default()
    });
    if own.is_some() && ctx.app.handoff.changes() != changes {
        // This pod began to take part in a hand-off during the read: its share may have
        // counted rows it received that the leaving pod counted too, or missed a table it
        // handed over. The request reads again with a fresh view (see `query::run`).
        return Err(format!(
            "{}: this pod's part in a hand-off changed during the read",
            crate::handoff::STALE_VIEW
        ));
    }
    Ok(Some(rows?))
}

/// This pod's share of `sel` as the tenant's pods compute theirs (`Mode::Partial`), or its
/// columns alone (`Mode::Shape`).
fn share(
    ctx: &Ctx,
    sel: &SelectStatement,
    one: &One,
    mode: plan::Mode,
) -> Result<Option<plan::Plan>, String> {
    partial::select_sql(
        ctx.app,
        sel,
        one.db,
        one.rp,
        one.measurement,
        one.fields,
        one.tag_keys,
        ctx.now_ns,
        ctx.view.handed(),
        mode,
        one.ordered_sums,
    )
}

/// This pod's share of `sel` for the gathering query to compute itself
/// ([`gather::Urls::url_with_own`]): the SQL its internal endpoint would run. `None` (the
/// share is read over `url()` like a peer's) while a hand-off involves this pod, whose checks
/// the endpoint makes around the read (one that begins during the read makes it stale, see
/// [`gathered`]), for a plan that needs settings of its own (`last()` aggregates in key
/// order), and while this pod does not know its address among the pods.
fn own_share(
    ctx: &Ctx,
    g: &Gather,
    sel: &SelectStatement,
    one: &One,
) -> Result<Option<String>, String> {
    if ctx.app.handoff.involved() || !g.knows_own() {
        return Ok(None);
    }
    let Some(p) = share(ctx, sel, one, plan::Mode::Partial)? else {
        return Ok(None);
    };
    // A share runs in place only when it needs no setting of its own beyond the thread rule,
    // which the gathering connections have too.
    let settings = p.read_settings();
    let plain = settings
        == crate::engine::ReadSettings {
            planned: settings.planned,
            ..Default::default()
        };
    Ok(plain.then_some(p.sql))
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
        params: None,
        statement: 0,
        now: ctx.now_ns,
        every: false,
    };
    let rows = ctx.fetch_series(what, false, &|from| meta::tag_keys_sql(from, &filter))?;
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
