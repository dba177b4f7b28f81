//! `last()` over whole series reads only their tails.
//!
//! A dashboard's "last value of every host" has no time buckets, so every series' last point
//! is found by reading all of its rows: 10,000 series of 5,000 points took 1.2-1.7 s, where
//! InfluxDB 1.8 reads the end of each series in about 0.5 s. The last point of every series
//! is at or after the earliest of those last points (the floor), so a first pass finds that
//! time and the aggregation reads only the rows from there on. When every series is recent
//! that is a few rows per series; a series that stopped long ago moves the floor back, and the
//! read costs what it did without it. The answer is the same either way: the floor never
//! excludes a series' last point.
//!
//! The first pass itself reads the last [`RECENT`] only, for the series that have every field
//! there (a live series' last points are recent): over all 50 M rows of a pod it took 83 ms,
//! over the last 15 minutes 11-16 ms, once (a scalar subquery the engine does not repeat).
//! Only the other series of the statement (stopped, or without a recent value of a field) are
//! read in full, found by id through the primary key; when they are most of the series, a
//! plain scan of every row is cheaper than looking each row's series up, and the first pass
//! reads every row as before.

use sluice_influxql::Expr;

use super::cond::{self, Operand};
use super::plan::Query;

/// How far back the first pass looks for the series' last points before it reads a series in
/// full: agents report every 10 s to a minute, so a live series has points here.
const RECENT: std::time::Duration = std::time::Duration::from_secs(15 * 60);

impl Query<'_> {
    /// The fields whose last points the statement reads, when every aggregate call of it is
    /// `last` of a field (`last(a)`, `last(a) * 2`, `last(a), last(b)`); `None` for any other.
    fn last_of(&self, exprs: &[&Expr]) -> Option<Vec<String>> {
        let mut fields = Vec::new();
        let mut other = false;
        for e in exprs {
            cond::visit(e, &mut |x| match x {
                Expr::Call { name, args } if name == "last" => match args.first() {
                    Some(Expr::VarRef { name, data_type }) => {
                        match self.scope.resolve(name, *data_type) {
                            op @ Operand::Field(..) => {
                                fields.push(cond::operand_sql(&op, "s.tags"))
                            }
                            _ => other = true,
                        }
                    }
                    _ => other = true,
                },
                Expr::Call { .. } | Expr::Distinct(_) => other = true,
                _ => {}
            });
        }
        fields.sort();
        fields.dedup();
        (!other && !fields.is_empty()).then_some(fields)
    }

    /// Whether the aggregation reads only the series' tails ([`Query::tail_floor`]).
    pub(super) fn reads_tails(&self, exprs: &[&Expr], bucketed: bool) -> bool {
        !bucketed && self.last_of(exprs).is_some()
    }

    /// The condition that keeps the rows at or after the earliest last point of the series
    /// the statement reads, under the statement's own conditions; none when the statement is
    /// not a `last` over whole series. With several fields, each field's last point counts
    /// (a series whose last `b` is older than its last `a` moves the floor to that `b`). A
    /// series with no value of a field gives no time for it; when nothing is found at all
    /// the floor is the earliest time a point can have, and the statement finds nothing anyway.
    /// The times come from the last [`RECENT`] of every series and from all rows of the
    /// series without each field there: every time either part finds is a true last point
    /// of a field, and every series' last points are found by one of them. The others are
    /// named by the series table, so a series whose rows were flushed before its series row
    /// is in neither part when it is not recent. No answer misses it for that: a read
    /// grouped or filtered by tags joins the series table and leaves such a series out
    /// anyway, and an ungrouped `last` of one field is the latest of its rows, at or after
    /// any floor. Ungrouped over several fields, a floor set by one field could pass such a
    /// series' last point of another: those statements read every row in the first pass.
    pub(super) fn tail_floor(&self, exprs: &[&Expr], bucketed: bool) -> Option<String> {
        if bucketed || !self.mode.reads_rows() {
            return None;
        }
        let fields = self.last_of(exprs)?;
        let lasts: Vec<String> = fields
            .iter()
            .enumerate()
            .map(|(i, x)| format!("maxIfOrNull(m.time, {x} IS NOT NULL) AS __sl_last{i}"))
            .collect();
        let lasts = lasts.join(", ");
        let names: Vec<String> = (0..fields.len()).map(|i| format!("__sl_last{i}")).collect();
        let join = self.filter.rows_use_tags;
        // The last times per series under `extra`, one read of the first pass.
        let lasts_where = |extra: &[String]| {
            format!(
                "SELECT {lasts} {} GROUP BY m.series_id",
                self.tables_and_filter(join, extra)
            )
        };
        let named_series_only = self.grouping.tagged() || join || !self.filter.series.is_empty();
        let reads = if !named_series_only && fields.len() > 1 {
            lasts_where(&[])
        } else {
            let recent = format!(
                "m.time >= fromUnixTimestamp64Nano(toInt64({}))",
                self.scope.now_ns.saturating_sub(RECENT.as_nanos() as i64)
            );
            // One pass over the recent rows, as a scalar that the engine computes once however
            // often the plan names it: each field's earliest last point there, and the series
            // with a recent value of every field (their last points are all recent). Read as
            // separate subqueries, the recent rows were aggregated twice and the older series
            // found twice: the first pass took 37 ms in the engine, 25 ms this way.
            let mins: Vec<String> = names.iter().map(|n| format!("min({n})")).collect();
            let every: Vec<String> = names.iter().map(|n| format!("{n} IS NOT NULL")).collect();
            let recent_pass = format!(
                "(SELECT ({}, groupArrayIf(__sl_sid, {})) FROM (SELECT m.series_id AS __sl_sid, {lasts} {} GROUP BY m.series_id))",
                mins.join(", "),
                every.join(" AND "),
                self.tables_and_filter(join, std::slice::from_ref(&recent)),
            );
            let recent_lasts: Vec<String> = names
                .iter()
                .enumerate()
                .map(|(i, n)| format!("tupleElement({recent_pass}, {}) AS {n}", i + 1))
                .collect();
            let complete = format!("tupleElement({recent_pass}, {})", names.len() + 1);
            let series = self.series_sql();
            let count = format!("(SELECT count() FROM ({series}))");
            let older = format!(
                "SELECT series_id FROM ({series}) WHERE series_id NOT IN (SELECT arrayJoin({complete}))"
            );
            // Reading every row beats looking each row's series up once the older series are
            // most of them (only the choice of read depends on this count).
            let older_rows = format!(
                "if(({count} - length({complete})) * 2 > {count}, 1, m.series_id IN ({older}))"
            );
            format!(
                "SELECT {} UNION ALL {}",
                recent_lasts.join(", "),
                lasts_where(&[older_rows])
            )
        };
        // The fallback sits inside the scalar subquery, so that the condition is a plain
        // `time >= constant` once the engine has run it: that prunes parts and granules.
        // Wrapped the other way (`ifNull(m.time >= (...), 1)`) it was a test on every row:
        // the last point per host over 50 M rows took 100 ms in the engine against 55.
        Some(format!(
            "m.time >= (SELECT ifNull(min(__sl_floor), fromUnixTimestamp64Nano(toInt64({}), 'UTC')) FROM (SELECT arrayJoin([{}]) AS __sl_floor FROM ({reads})))",
            sluice_core::body::MIN_TIME_NS,
            names.join(", "),
        ))
    }
}
