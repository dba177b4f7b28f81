//! What a two-phase aggregate's first phase groups by: each series, or with time buckets each
//! group of series that share the grouping tags.
//!
//! The first phase aggregates per series and bucket, and the tags are joined to those
//! partials. Over every series in buckets that is one state per series and bucket: the means
//! of 10,000 series per 10 minutes over 12 hours are 720,000 states in a hash table, which
//! took 1.2-1.4 s of the query's 1.3. Grouped by `region` the answer has only 10 groups, so
//! the first phase numbers the groups of series first (a lookup from each series to its
//! group's number, built from the series table) and aggregates per group and bucket:
//! 0.66-0.72 s. Without buckets the partials stay per series: those aggregate in key order,
//! which a group's number would lose. Under tag conditions too: they usually select a few
//! series, and numbering them costs a third read of the series table (8 hosts per minute
//! over an hour: 53-64 ms per series, 61-71 ms in groups).

use super::plan::Query;

/// The first phase's key, and the table that gives each key its tags (columns `series_id`
/// and `tags`, as the series table has them).
pub(super) struct Groups {
    /// The key's expression over the points (`m`), preceded by what it needs (`WITH ...`).
    pub with: String,
    pub key: String,
    /// The key's tags, to join to the partials.
    pub tags: String,
}

impl Query<'_> {
    pub(super) fn groups(&self, bucketed: bool) -> Groups {
        let series = self.series_sql();
        if !bucketed || !self.filter.series.is_empty() || !self.mode.reads_rows() {
            return Groups {
                with: String::new(),
                key: "m.series_id".into(),
                tags: series,
            };
        }
        // Series of one tag set share a number; a series missing from the series table gets 0,
        // which joins nothing (as the series' own id did).
        let numbered = format!(
            "SELECT series_id, tags, toUInt64(dense_rank() OVER (ORDER BY {})) AS __sl_group FROM ({series}) AS s",
            self.grouping.sql()
        );
        Groups {
            with: format!(
                "WITH (SELECT (groupArray(series_id), groupArray(__sl_group)) FROM ({numbered})) AS __sl_groups "
            ),
            key: "transform(m.series_id, __sl_groups.1, __sl_groups.2, toUInt64(0))".into(),
            tags: format!(
                "SELECT __sl_group AS series_id, any(tags) AS tags FROM ({numbered}) GROUP BY __sl_group"
            ),
        }
    }
}
