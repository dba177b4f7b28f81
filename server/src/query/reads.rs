//! What a plan reads: the measurement's rows in the statement's time range under its row
//! conditions, and the series its tag conditions select from the series table, as a set of
//! ids to read rows by and with their tags to join to points.
//!
//! The series table keeps a row per series and pod write; a series recorded twice (a hand-off
//! leaves the receiving pod so until the engine merges the rows) has rows that differ only in
//! when it was first seen, since its id is the hash of its measurement and tags. A set of ids
//! may take every row; tags joined to points take one row per series.

use sluice_core::names::{quote_ident, quote_str};

use super::cond::TimeRange;
use super::plan::Query;
use super::series_ids::in_list;
use crate::catalog::SERIES_TABLE;

/// The series table's condition for the series of `measurement` in `db` that the tag
/// conditions `series` (SQL over `tags`) select.
pub(super) fn series_conds(db: &str, measurement: &str, series: &[String]) -> String {
    let mut conds = vec![
        format!("db = {}", quote_str(db)),
        format!("measurement = {}", quote_str(measurement)),
    ];
    conds.extend(series.iter().cloned());
    conds.join(" AND ")
}

impl Query<'_> {
    /// The measurement's series that the tag conditions select, with their tags: one row per
    /// series, since they are joined to points.
    ///
    /// Under tag conditions the rows are filtered first and then kept one per series
    /// (`LIMIT 1 BY`): `FINAL` merges every row of the measurement before it filters, and
    /// over 500,000 series it took 95-140 ms for 8 hosts against 15-17 ms, and 107-129 ms
    /// for a tenth of the series against 60-62 ms. Without conditions `FINAL` is as fast or
    /// faster (114 against 122 ms over 500,000 series in 5 parts; 49 against 325 ms over a
    /// million in one part), so it stays (bench/README, "the series lookup at many series").
    pub(super) fn series_sql(&self) -> String {
        if let Some(series) = self.src.series {
            let mut conds = vec!["1".to_string()];
            conds.extend(self.filter.series.iter().cloned());
            return format!(
                "SELECT series_id, tags FROM {series} WHERE {}",
                conds.join(" AND ")
            );
        }
        let table = quote_ident(SERIES_TABLE);
        if self.filter.series.is_empty() {
            let conds = self.series_conds();
            return format!("SELECT series_id, tags FROM {table} FINAL WHERE {conds}");
        }
        // With the ids known, their rows are found by the table's key instead of by testing
        // every series' tags.
        let conds = match self.src.series_ids {
            Some(ids) => series_conds(
                self.src.db,
                self.src.measurement,
                &[format!("series_id IN ({})", in_list(ids))],
            ),
            None => self.series_conds(),
        };
        format!("SELECT series_id, tags FROM {table} WHERE {conds} LIMIT 1 BY series_id")
    }

    /// The series table's condition for the measurement's series that the tags select.
    fn series_conds(&self) -> String {
        series_conds(self.src.db, self.src.measurement, &self.filter.series)
    }

    /// The ids of the series the tag conditions select, as a set to look rows up in.
    ///
    /// Read without `FINAL`: a series' rows in the series table differ only in when it was
    /// first seen (its id is the hash of its measurement and tags), so a row not yet merged
    /// away adds nothing to a set of ids. `FINAL` keeps the engine from filtering the tags
    /// before it merges the rows: over a million series one host's lookup took 40-63 ms with
    /// it and 6-8 ms without (bench/README, "the series lookup at many series").
    fn series_ids_sql(&self) -> String {
        if self.src.series.is_some() {
            return format!("SELECT series_id FROM ({})", self.series_sql());
        }
        if let Some(ids) = self.src.series_ids {
            return in_list(ids);
        }
        format!(
            "SELECT series_id FROM {} WHERE {}",
            quote_ident(SERIES_TABLE),
            self.series_conds()
        )
    }

    /// `FROM` and `WHERE`: the table, joined with its series' tags when `join`; tag conditions
    /// select series by id either way. The join alone reads every row of the range: a raw
    /// select of one host over 12 of the benchmark's hours took 165 ms, the same select by id
    /// reads only that series' granules.
    pub(super) fn tables_and_filter(&self, join: bool, extra: &[String]) -> String {
        let series = self.series_sql();
        let mut sql = format!("FROM {} AS m", self.src.table);
        let mut conds: Vec<String> = Vec::new();
        if join {
            sql.push_str(&format!(
                " INNER JOIN ({series}) AS s ON m.series_id = s.series_id"
            ));
        }
        if !self.filter.series.is_empty() {
            conds.push(format!("m.series_id IN ({})", self.series_ids_sql()));
        }
        let TimeRange { min, max } = self.filter.range;
        // A subquery's rows are already within the range, which its statement took from this
        // one; its first bucket may start before it, and InfluxDB keeps that row.
        if let Some(lo) = min.filter(|_| self.src.series.is_none()) {
            conds.push(format!("m.time >= fromUnixTimestamp64Nano(toInt64({lo}))"));
        }
        if let Some(hi) = max {
            conds.push(format!("m.time <= fromUnixTimestamp64Nano(toInt64({hi}))"));
        }
        conds.extend(self.filter.rows.iter().cloned());
        conds.extend(extra.iter().cloned());
        if !conds.is_empty() {
            sql.push_str(" WHERE ");
            sql.push_str(&conds.join(" AND "));
        }
        sql
    }
}

#[cfg(test)]
mod tests {
    use super::super::plan::plan_of;

    /// Points read with their tags (raw selects, transforms of them, `integral()`) still pick
    /// their series by id, so that the engine reads only those series' granules, not every row
    /// of the range.
    #[test]
    fn points_read_with_their_tags_are_picked_by_series_id() {
        for q in [
            "SELECT value FROM cpu WHERE host = 'a'",
            "SELECT derivative(value) FROM cpu WHERE host = 'a'",
            "SELECT integral(value) FROM cpu WHERE host = 'a' GROUP BY time(1m)",
        ] {
            let p = plan_of(q).unwrap().unwrap();
            assert!(p.sql.contains("INNER JOIN"), "{q}: {}", p.sql);
            assert!(
                p.sql.contains("m.series_id IN (SELECT series_id"),
                "{q}: {}",
                p.sql
            );
        }
        let p = plan_of("SELECT value FROM cpu").unwrap().unwrap();
        assert!(!p.sql.contains("m.series_id IN"), "{}", p.sql);
    }

    /// Series that tag conditions select are read without `FINAL` (see `Query::series_sql`
    /// and `Query::series_ids_sql`); the tags joined to points stay one row per series.
    #[test]
    fn series_picked_by_tags_are_looked_up_without_final() {
        let p = plan_of("SELECT value FROM cpu WHERE host = 'a'")
            .unwrap()
            .unwrap();
        assert!(
            p.sql.contains(
                "m.series_id IN (SELECT series_id FROM `sluice_series` WHERE db = 'db' AND measurement = 'cpu' AND (tags['host'] = 'a'))"
            ),
            "{}",
            p.sql
        );
        assert!(
            p.sql.contains(
                "INNER JOIN (SELECT series_id, tags FROM `sluice_series` WHERE db = 'db' AND measurement = 'cpu' AND (tags['host'] = 'a') LIMIT 1 BY series_id) AS s"
            ),
            "{}",
            p.sql
        );
    }

    /// With the ids of the condition's series known ([`super::super::series_ids`]), the plan
    /// names them in both reads and looks nothing up by tags; the condition it would look up
    /// is the one [`super::super::plan::series_lookup`] gives the caller.
    #[test]
    fn known_series_ids_are_named_in_the_plan() {
        use super::super::plan::{plan, select_of, series_lookup, with_test_source, Mode, Source};
        let q = select_of("SELECT value FROM cpu WHERE host = 'a' OR host = 'b'");
        let all = select_of("SELECT value FROM cpu");
        let known = |ids: &[u64]| {
            with_test_source(|src| {
                let src = Source {
                    series_ids: Some(ids),
                    ..*src
                };
                plan(&q, &src, 0, Mode::Whole).unwrap().unwrap().sql
            })
        };
        with_test_source(|src| {
            assert_eq!(
                series_lookup(&q, src, 0).unwrap().as_deref(),
                Some("db = 'db' AND measurement = 'cpu' AND (tags['host'] IN ('a', 'b'))")
            );
            assert_eq!(series_lookup(&all, src, 0).unwrap(), None);
        });
        let sql = known(&[7, 19]);
        assert!(sql.contains("m.series_id IN (7, 19)"), "{sql}");
        assert!(
            sql.contains("WHERE db = 'db' AND measurement = 'cpu' AND series_id IN (7, 19) LIMIT 1 BY series_id"),
            "{sql}"
        );
        assert!(!sql.contains("tags['host'] IN"), "{sql}");
        let sql = known(&[]);
        assert!(
            sql.contains("m.series_id IN (SELECT toUInt64(0) WHERE 0)"),
            "{sql}"
        );
    }
}
