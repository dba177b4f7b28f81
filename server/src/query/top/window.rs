//! The points `top()` and `bottom()` without tags rank under `LIMIT` or `OFFSET`, as InfluxDB
//! 1.8 reads them.
//!
//! InfluxDB builds the call's input from a storage iterator that still carries the
//! statement's `LIMIT` and `OFFSET`, and that iterator stops one point past them: it yields
//! each group's first `OFFSET + LIMIT + 1` points in time order (`tsm1`'s limit iterator,
//! which leaves the offset to a later one). Only those are ranked, and the ranked points
//! then take the `LIMIT` and `OFFSET` as every answer does: `top("v", 2) ... LIMIT 3` ranks a
//! series' first four points. With tags as arguments the input is a `max` per tag value
//! built without the limits, and the window does not apply.
//!
//! Over a subquery's answer there is no storage iterator, and every point ranks.
//!
//! InfluxDB limits the points of each shard (seven days by default) apart; sluice takes the
//! window over the whole range, as one shard would. Points of several series at one time
//! take the window in series key order.

use super::super::grouping::Grouping;
use super::super::plan::{Mode, Query, KEY, TAGS, TIME};
use super::Ranked;

impl Query<'_> {
    /// How many of each group's first points the call ranks, where the window applies.
    pub(super) fn rank_window(&self, r: &Ranked) -> Option<u64> {
        // Over a subquery's rows InfluxDB ranks them all: its iterator is not the storage's.
        if !r.tags.is_empty() || r.selector || r.by_time || self.src.series.is_some() {
            return None;
        }
        let (limit, offset) = (self.stmt.limit.unwrap_or(0), self.stmt.offset.unwrap_or(0));
        (limit > 0 || offset > 0).then(|| offset.saturating_add(limit).saturating_add(1))
    }

    /// How many points per group a pod's share keeps: its whole window, where one applies,
    /// since the tenant's window is the first points of the pods' windows together.
    pub(super) fn kept_per_group(&self, r: &Ranked) -> u64 {
        match (self.rank_window(r), &self.mode) {
            (Some(w), Mode::Partial | Mode::Shape) => w,
            _ => r.n,
        }
    }

    /// The condition on a pod's rows (field `x` SQL) that keeps only the window's points.
    pub(super) fn window_rows(&self, r: &Ranked, x: &str) -> Option<String> {
        let window = self.rank_window(r)?;
        if matches!(self.mode, Mode::Shape) {
            // Describing the columns reads nothing.
            return None;
        }
        let from = self.tables_and_filter(true, &[format!("{x} IS NOT NULL")]);
        let (order, by) = self.window_order(
            &self.grouping.sql(),
            "m.time",
            "toJSONString(mapSort(s.tags))",
        );
        Some(format!(
            "(m.series_id, m.time) IN (SELECT m.series_id, m.time {from} ORDER BY {order} LIMIT {window}{by})"
        ))
    }

    /// The window's points out of the pods' shares (the gathering pod's `source`).
    pub(super) fn window_of_shares(&self, r: &Ranked, points: String) -> String {
        let Some(window) = self.rank_window(r) else {
            return points;
        };
        let (order, by) = self.window_order(TAGS, TIME, KEY);
        format!("SELECT * FROM ({points}) ORDER BY {order} LIMIT {window}{by}")
    }

    /// The window's order and its `BY` clause, from the group, time and series key columns.
    fn window_order(&self, group: &str, time: &str, key: &str) -> (String, String) {
        let dir = self.direction();
        let by = match self.grouping {
            Grouping::None => String::new(),
            Grouping::Tags(_) => format!(" BY {group}"),
        };
        (format!("{group}, {time}{dir}, {key}"), by)
    }
}
