//! `GROUP BY time(interval, offset)`: the bucket of a row, the buckets a range spans, and the
//! SQL that fills the empty ones (`WITH FILL`; window functions for `fill(linear)`).

use super::plan::{TAGS, TIME};
use super::PlanError;

/// Linear interpolation between the nearest present buckets before and after, inside the
/// series; none at its edges (InfluxDB's `fill(linear)`).
pub fn linear_sql(c: &str) -> String {
    let before = format!(
        "PARTITION BY {TAGS} ORDER BY {TIME} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING"
    );
    let after = format!(
        "PARTITION BY {TAGS} ORDER BY {TIME} ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING"
    );
    let pv = format!("last_value({c}) OVER ({before})");
    let pt = format!("last_value(if({c} IS NULL, NULL, {TIME})) OVER ({before})");
    let nv = format!("first_value({c}) OVER ({after})");
    let nt = format!("first_value(if({c} IS NULL, NULL, {TIME})) OVER ({after})");
    format!("ifNull({c}, {pv} + ({nv} - {pv}) * ({TIME} - {pt}) / ({nt} - {pt}))")
}

pub struct Bucketing {
    pub every: i64,
    pub offset: i64,
    pub min: Option<i64>,
    pub max: i64,
}

impl Bucketing {
    pub fn start_of(&self, t: i64) -> i64 {
        let x = t.saturating_sub(self.offset);
        (x - x.rem_euclid(self.every)).saturating_add(self.offset)
    }

    pub fn bucket_sql(&self) -> String {
        let (i, o) = (self.every, self.offset);
        format!(
            "toInt64((toUnixTimestamp64Nano(m.time) - {o}) - (((toUnixTimestamp64Nano(m.time) - {o}) % {i}) + {i}) % {i} + {o})"
        )
    }

    /// `ORDER BY ... WITH FILL`: every bucket of the range in each series.
    pub fn fill_sql(&self) -> Result<String, PlanError> {
        let from = match self.min {
            Some(lo) => format!(" FROM toInt64({})", self.start_of(lo)),
            None => String::new(),
        };
        Ok(format!(
            "ORDER BY {TAGS}, {TIME} WITH FILL{from} TO toInt64({}) STEP {}",
            self.start_of(self.max).saturating_add(1),
            self.every
        ))
    }
}
