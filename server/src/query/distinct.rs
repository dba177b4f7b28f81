//! `distinct("f")` (and `SELECT DISTINCT "f"`): a field's distinct values per series group and
//! time bucket, one row each, in the order they first occur (reading backwards under `ORDER BY
//! time DESC`, as InfluxDB does; a tie at one time goes to the series first in key order), at
//! the bucket's start time, as InfluxDB 1.8 answers it.
//!
//! Each pod sends every `(group, bucket, value)` with the first time and series it holds it
//! at; the gathering pod keeps the least of those per value, which is the tenant's.

use sluice_influxql::{Expr, SortOrder};

use super::cond;
use super::math::{self, Wrap};
use super::plan::{value_col, Mode, Query, SID, TAGS, TIME};
use super::PlanError;

/// The bucket of a value (a constant without `GROUP BY time`).
const BUCKET: &str = "__sl_b";
/// When and in which series a value first occurs: `(time, series key)`, the time negated when
/// the statement reads backwards, so that the least is always the first.
const FIRST: &str = "__sl_first";

/// `distinct("f")` as the only expression of a select list, perhaps under math and arithmetic
/// with constants (`distinct("f") / 100`): its field, and what stands around it.
/// `count(distinct(...))` is an aggregate, planned elsewhere.
pub(super) fn distinct_field<'e>(
    exprs: &[&'e Expr],
) -> Result<Option<(&'e Expr, Vec<Wrap>)>, PlanError> {
    let mut found = None;
    for e in exprs {
        if is_distinct(e) {
            found = found.or(Some((*e, vec![])));
        } else if nested(e) {
            let (wraps, call) = math::around_call(e, &|n| n == "distinct")?.ok_or_else(|| {
                PlanError::Unsupported(
                    "distinct() inside an expression other than math functions and arithmetic with constants is not supported by sluice yet".into(),
                )
            })?;
            found = found.or(Some((call, wraps)));
        }
    }
    let Some((call, wraps)) = found else {
        return Ok(None);
    };
    if exprs.len() > 1 {
        return Err(PlanError::Invalid(
            "aggregate function distinct() cannot be combined with other functions or fields"
                .into(),
        ));
    }
    match call {
        Expr::Call { args, .. } => match args.as_slice() {
            [f @ Expr::VarRef { .. }] => Ok(Some((f, wraps))),
            _ => Err(PlanError::Invalid(
                "distinct function can only have one argument, a field".into(),
            )),
        },
        _ => unreachable!("is_distinct checked"),
    }
}

fn is_distinct(e: &Expr) -> bool {
    matches!(e, Expr::Call { name, .. } if name == "distinct")
}

/// Whether `e` holds a `distinct()` other than `count`'s argument.
fn nested(e: &Expr) -> bool {
    match e {
        Expr::Call { name, .. } if name == "distinct" => true,
        Expr::Call { name, .. } if name == "count" => false,
        Expr::Call { args, .. } => args.iter().any(nested),
        Expr::Binary { lhs, rhs, .. } => nested(lhs) || nested(rhs),
        Expr::Paren(inner) => nested(inner),
        Expr::Distinct(_) => true,
        _ => false,
    }
}

/// `SELECT DISTINCT "f"` as the call it means, so that one plan serves both spellings.
pub(super) fn as_call(e: &Expr) -> Option<Expr> {
    match e {
        Expr::Distinct(f) => Some(Expr::Call {
            name: "distinct".into(),
            args: vec![Expr::VarRef {
                name: f.clone(),
                data_type: None,
            }],
        }),
        _ => None,
    }
}

impl Query<'_> {
    /// The plan of `distinct(field)` (see the module's doc).
    pub(super) fn distinct(&self, field: &Expr, wraps: &[Wrap]) -> Result<String, PlanError> {
        let x = cond::field_sql(field, self.scope, "s.tags")?;
        let value = value_col(0);
        let bucketing = self.bucketing()?;
        let firsts = match self.mode {
            Mode::Whole | Mode::Partial | Mode::Shape => {
                // Per series first, so that only its distinct values meet the series' tags.
                let bucket = match &bucketing {
                    Some(b) => b.bucket_sql(),
                    None => "toInt64(0)".into(),
                };
                let present = [format!("{x} IS NOT NULL")];
                // Read backwards (`ORDER BY time DESC`), a value first occurs at its last time.
                let first = match self.stmt.order {
                    Some(SortOrder::Descending) => "-max",
                    _ => "min",
                };
                let per_series = format!(
                    "SELECT m.series_id AS {SID}, {bucket} AS {BUCKET}, {x} AS {value}, {first}(toUnixTimestamp64Nano(m.time)) AS t {} GROUP BY {SID}, {BUCKET}, {value}",
                    self.tables_and_filter(self.filter.rows_use_tags, &present)
                );
                format!(
                    "SELECT {} AS {TAGS}, p.{BUCKET} AS {BUCKET}, p.{value} AS {value}, (p.t, toJSONString(mapSort(s.tags))) AS {FIRST} FROM ({per_series}) AS p INNER JOIN ({}) AS s ON p.{SID} = s.series_id",
                    self.grouping.sql(),
                    self.series_sql()
                )
            }
            Mode::Final(source) => {
                format!("SELECT {TAGS}, {BUCKET}, {value}, {FIRST} FROM {source}")
            }
        };
        let values = format!(
            "SELECT {TAGS}, {BUCKET}, {value}, min({FIRST}) AS {FIRST} FROM ({firsts}) GROUP BY {TAGS}, {BUCKET}, {value}"
        );
        if matches!(self.mode, Mode::Partial | Mode::Shape) {
            return Ok(values);
        }
        let time = match &bucketing {
            Some(_) => BUCKET.to_string(),
            None => format!("toInt64({})", self.filter.range.min.unwrap_or(0)),
        };
        let dir = self.direction();
        // Wrapped, the value gets a name of its own: the order stays the first occurrences'.
        let shown = match wraps {
            [] => value.clone(),
            _ => format!("{} AS __sl_w", math::apply(wraps, value.clone())?),
        };
        Ok(format!(
            "SELECT {TAGS}, {time} AS {TIME}, {shown} FROM ({values}) ORDER BY {TAGS}{dir}, {BUCKET}{dir}, {FIRST}{}",
            self.limit_by()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(q: &str) -> Result<Option<String>, PlanError> {
        let stmt = crate::query::plan::select_of(q);
        let calls: Vec<Expr> = stmt
            .fields
            .iter()
            .map(|f| as_call(&f.expr).unwrap_or_else(|| f.expr.clone()))
            .collect();
        let exprs: Vec<&Expr> = calls.iter().collect();
        Ok(distinct_field(&exprs)?.map(|(f, _)| f.to_string()))
    }

    #[test]
    fn both_spellings_are_the_call_and_count_keeps_its_own() {
        assert_eq!(
            field_of("SELECT distinct(v) FROM m").unwrap().as_deref(),
            Some("v")
        );
        assert_eq!(
            field_of("SELECT DISTINCT v FROM m").unwrap().as_deref(),
            Some("v")
        );
        assert_eq!(field_of("SELECT count(distinct(v)) FROM m").unwrap(), None);
        assert_eq!(field_of("SELECT count(DISTINCT v) FROM m").unwrap(), None);
    }

    #[test]
    fn refuses_company_and_arithmetic() {
        assert_eq!(
            field_of("SELECT distinct(v), host FROM m")
                .unwrap_err()
                .to_string(),
            "aggregate function distinct() cannot be combined with other functions or fields"
        );
        assert!(field_of("SELECT distinct(v) * u FROM m")
            .unwrap_err()
            .to_string()
            .contains("not supported by sluice yet"));
        assert_eq!(
            field_of("SELECT round(distinct(v) / 100) FROM m")
                .unwrap()
                .as_deref(),
            Some("v")
        );
    }
}
