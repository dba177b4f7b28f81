//! `GROUP BY time(interval, offset)`: the bucket of a row, the buckets a range spans, and the
//! SQL that fills the empty ones (`WITH FILL`; window functions for `fill(linear)`).

use sluice_core::names::quote_str;

use super::plan::{TAGS, TIME};
use super::PlanError;

/// Linear interpolation between the nearest present buckets before and after, inside the
/// series; none at its edges (InfluxDB's `fill(linear)`). Computed as InfluxDB computes it
/// (the slope times the distance, plus the value before, in floats) and cast to the column's
/// type: an integer aggregate's gap is truncated to an integer.
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
    let slope = format!("toFloat64({nv} - {pv}) / toFloat64({nt} - {pt})");
    // An integer's line is truncated, as Go converts it. The engine computes the line for
    // every row, a gap or not, and casts the values under NULLs too, so the cast is one that
    // cannot fail: a NaN (of a NaN beside the gap, or of no gap) is NULL as an integer and
    // stays NaN as a float.
    let line = format!("{slope} * toFloat64({TIME} - {pt}) + toFloat64({pv})");
    let ty = format!("toTypeName({c})");
    format!("ifNull({c}, accurateCastOrNull(if({ty} LIKE '%Int%', trunc({line}), {line}), {ty}))")
}

pub struct Bucketing {
    pub every: i64,
    pub offset: i64,
    pub min: Option<i64>,
    pub max: i64,
    /// `tz('Europe/Paris')`: buckets start at the zone's wall-clock boundaries (a day at local
    /// midnight), as in InfluxDB: a time is shifted by the zone's UTC offset at that time
    /// before it is cut, and back after.
    pub zone: Option<String>,
}

/// The condition on rows around a [`Bucketing::fill_sql`] that keeps the groups that exist
/// (a plan's answer read as it is drops the others where it is read instead,
/// [`super::shape::parse_rows`]).
pub fn real_groups() -> String {
    format!("{TAGS} != ''")
}

impl Bucketing {
    pub fn start_of(&self, t: i64) -> i64 {
        let x = t.saturating_sub(self.offset);
        (x - x.rem_euclid(self.every)).saturating_add(self.offset)
    }

    /// The start of a read row's bucket.
    ///
    /// The rows a plan reads are those of the statement's range, at or after its start
    /// (`Query::tables_and_filter`), so from the first bucket's start on the bucket is a
    /// plain division, whose truncation is then the floor: three column operations for each
    /// row where [`Self::start_sql`]'s floored modulo takes seven, and reads do not compile
    /// expressions. Over the 50 M rows of 12 hours by region the plan took 810-924 ms instead
    /// of 961-1,031, and the hour of every series 64-75 instead of 82 (bench/README,
    /// "2026-11-30 (later)"). A first bucket before 1970 keeps the modulo, whose differences
    /// cannot overflow; so does a time zone, whose shift varies within the range.
    pub fn bucket_sql(&self) -> String {
        let t = "toUnixTimestamp64Nano(m.time)";
        match (self.min.map(|lo| self.start_of(lo)), &self.zone) {
            (Some(first), None) if first >= 0 => {
                let i = self.every;
                format!("toInt64({first} + intDiv({t} - {first}, {i}) * {i})")
            }
            _ => self.start_sql(t),
        }
    }

    /// The start of the bucket of `t` (SQL of nanoseconds since the epoch).
    pub(super) fn start_sql(&self, t: &str) -> String {
        let (i, o) = (self.every, self.offset);
        let shift = match &self.zone {
            Some(z) => format!(
                "toInt64(timeZoneOffset(toDateTime(intDiv({t}, 1000000000), {}))) * 1000000000",
                quote_str(z)
            ),
            None => "0".into(),
        };
        // Signed throughout: with the interval as a bare literal (unsigned) the engine's
        // modulo of a time before 1970 wrapped around 2^64.
        let x = format!("({t} + {shift} - toInt64({o}))");
        let i = format!("toInt64({i})");
        format!("toInt64({x} - ((({x} % {i}) + {i}) % {i}) - {shift} + {o})")
    }

    /// `ORDER BY` the tags and bucket `WITH FILL`: every bucket of the range in each series. Over no rows at all the engine
    /// still fills the range, with empty tags (the column's default, where a real group's tags
    /// are a JSON object); a query around it keeps only [`real_groups`], as InfluxDB answers
    /// no series when nothing matched.
    pub fn fill_sql(&self) -> Result<String, PlanError> {
        let bound = |t: i64| match self.zone {
            None => format!("toInt64({})", self.start_of(t)),
            Some(_) => self.start_sql(&format!("toInt64({t})")),
        };
        let from = match self.min {
            // An empty range (`time > 9223372036854775807`, or a lower bound past now() with
            // none above) matches no row, and the engine refuses a fill that ends before it
            // starts: there is nothing to fill.
            Some(lo) if lo > self.max => return Ok(format!("ORDER BY {TAGS}, {TIME}")),
            Some(lo) => format!(" FROM {}", bound(lo)),
            None => String::new(),
        };
        Ok(format!(
            "ORDER BY {TAGS}, {TIME} WITH FILL{from} TO {} + 1 STEP {}",
            bound(self.max),
            self.every
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::Bucketing;

    fn minutes(min: Option<i64>, offset: i64, zone: Option<&str>) -> Bucketing {
        Bucketing {
            every: 60_000_000_000,
            offset,
            min,
            max: 1_800_000_000_000_000_000,
            zone: zone.map(str::to_string),
        }
    }

    /// From the range's first bucket on, a row's bucket is that start plus whole intervals,
    /// offsets included; a range without a start, before 1970, or in a time zone keeps the
    /// floored modulo.
    #[test]
    fn a_rows_bucket_counts_whole_intervals_from_the_first() {
        let b = minutes(Some(1_795_955_940_000_000_001), 0, None);
        assert_eq!(
            b.bucket_sql(),
            "toInt64(1795955940000000000 + intDiv(toUnixTimestamp64Nano(m.time) - 1795955940000000000, 60000000000) * 60000000000)"
        );
        let offset = minutes(Some(1_795_955_940_000_000_001), 15_000_000_000, None);
        assert!(offset
            .bucket_sql()
            .starts_with("toInt64(1795955895000000000 + intDiv("));
        for general in [
            minutes(None, 0, None),
            minutes(Some(-1), 0, None),
            minutes(Some(1_795_955_940_000_000_001), 0, Some("Europe/Paris")),
        ] {
            assert!(general.bucket_sql().contains(" % toInt64(60000000000)"));
        }
    }

    /// The engine refuses `WITH FILL FROM a TO b` with `a > b` (its exception reached the
    /// user for `time > 9223372036854775807`); a range that matches nothing fills nothing.
    #[test]
    fn an_empty_range_fills_nothing() {
        let past_max = minutes(Some(1_800_000_000_000_000_001), 0, None);
        assert_eq!(past_max.fill_sql().unwrap(), "ORDER BY __sl_tags, __sl_t");
        let at_max = minutes(Some(1_800_000_000_000_000_000), 0, None);
        assert!(at_max.fill_sql().unwrap().contains("WITH FILL FROM "));
    }
}
