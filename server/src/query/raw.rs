//! The raw half of a `SELECT` plan: the points as they are (one row per point with a selected
//! field present), and transforms over them (`derivative("v")` without `GROUP BY time`).

use sluice_core::names::quote_str;
use sluice_influxql::{Expr, Literal};

use super::cond::{self, Operand};
use super::functions;
use super::plan::{value_col, Mode, Query, KEY, TAGS, TIME};
use super::PlanError;

/// A transformed column: its index, the transform, and the math around it (outermost first).
pub(super) type Transformed = (usize, functions::Transform, Vec<super::math::Wrap>);

impl Query<'_> {
    /// Rows as they are: one per point with at least one selected field present.
    pub(super) fn raw(&self, exprs: &[&Expr]) -> Result<String, PlanError> {
        let transforming = exprs.iter().any(|e| functions::is_raw_transform(e));
        if self.stmt.group_by_time().is_some() && !transforming {
            return Err(PlanError::Invalid(
                "GROUP BY requires at least one aggregate function".into(),
            ));
        }
        let mut cols = Vec::new();
        let mut present = Vec::new();
        let mut transforms = Vec::new();
        for (i, e) in exprs.iter().enumerate() {
            // `derivative("v", 1s)`: the field's points here, the transform over them after.
            let (wraps, e) = match super::math::around_transform(e)? {
                Some((wraps, t)) => (wraps, t),
                None => (Vec::new(), *e),
            };
            let e = match functions::transform_of(e, 1_000_000_000)? {
                Some((t, _)) if self.stmt.group_by_time().is_some() => {
                    return Err(PlanError::Invalid(format!(
                        "aggregate function required inside the call to {}",
                        t.name()
                    )))
                }
                Some((t, field)) => {
                    transforms.push((i, t, wraps));
                    field
                }
                None => e,
            };
            let (sql, tag) = self.raw_expr(e)?;
            if !tag {
                // A point with a field the expression reads is a row, even where the
                // expression is null (`sqrt` of a negative value, `"a" - "b"` where `b` is
                // missing), as in InfluxDB.
                present.extend(self.fields_present(e));
            }
            cols.push(format!("{sql} AS {}", value_col(i)));
        }
        let extra = if present.is_empty() {
            vec![]
        } else {
            vec![format!("({})", present.join(" OR "))]
        };
        // Points of several series at one time come in series-key order, as InfluxDB merges
        // them.
        let dir = self.direction();
        let tags = self.grouping.sql();
        let from = self.tables_and_filter(true, &extra);
        let points = match self.mode {
            Mode::Whole => format!(
                "SELECT {tags} AS {TAGS}, toUnixTimestamp64Nano(m.time) AS {TIME}, {}, toJSONString(mapSort(s.tags)) AS {KEY} {from}",
                cols.join(", ")
            ),
            Mode::Partial | Mode::Shape => {
                // A pod's first `OFFSET + LIMIT` points per series are all the final answer
                // can take from it.
                let limit = match (self.stmt.limit, transforms.is_empty()) {
                    (Some(l), true) => format!(
                        " ORDER BY {TAGS}{dir}, {TIME}{dir}, {KEY}{dir} LIMIT {} BY {TAGS}",
                        l.saturating_add(self.stmt.offset.unwrap_or(0))
                    ),
                    _ => String::new(),
                };
                return Ok(format!(
                    "SELECT {tags} AS {TAGS}, toUnixTimestamp64Nano(m.time) AS {TIME}, {}, toJSONString(mapSort(s.tags)) AS {KEY} {from}{limit}",
                    cols.join(", ")
                ));
            }
            Mode::Final(source) => {
                let names: Vec<String> = (0..exprs.len()).map(value_col).collect();
                format!("SELECT {TAGS}, {TIME}, {}, {KEY} FROM {source}", names.join(", "))
            }
        };
        if transforms.is_empty() {
            let names: Vec<String> = (0..exprs.len()).map(value_col).collect();
            return Ok(format!(
                "SELECT {TAGS}, {TIME}, {} FROM ({points}) ORDER BY {TAGS}{dir}, {TIME}{dir}, {KEY}{dir}{}",
                names.join(", "),
                self.limit_by()
            ));
        }
        self.transformed(points, exprs.len(), &transforms)
    }

    /// `<field> IS NOT NULL` for each field `e` reads.
    fn fields_present(&self, e: &Expr) -> Vec<String> {
        let mut out = Vec::new();
        cond::visit(e, &mut |x| {
            if let Expr::VarRef { name, data_type } = x {
                if let Operand::Field(sql, _) = self.scope.resolve(name, *data_type) {
                    out.push(format!("{sql} IS NOT NULL"));
                }
            }
        });
        out
    }

    /// `rows` (tags, time, values) with the transforms applied per series in time order;
    /// rows where no transform has a value (a series' first point, a gap) are left out.
    pub(super) fn transformed(
        &self,
        rows: String,
        width: usize,
        transforms: &[Transformed],
    ) -> Result<String, PlanError> {
        let beyond = self.beyond_asked();
        let mut cols = Vec::new();
        for i in 0..width {
            let c = value_col(i);
            cols.push(match transforms.iter().find(|(j, _, _)| *j == i) {
                Some((_, t, wraps)) => {
                    let sql = t.sql(&c, self.descending(), beyond.as_deref());
                    format!("{} AS {c}", super::math::apply(wraps, sql)?)
                }
                None => c,
            });
        }
        let present: Vec<String> = transforms
            .iter()
            .map(|(i, _, _)| format!("{} IS NOT NULL", value_col(*i)))
            .collect();
        let mut keep = format!("({})", present.join(" OR "));
        if let Some(b) = &beyond {
            keep.push_str(&format!(" AND NOT ({b})"));
        }
        let dir = self.direction();
        Ok(format!(
            "SELECT * FROM (SELECT {TAGS}, {TIME}, {} FROM ({rows})) WHERE {keep} ORDER BY {TAGS}{dir}, {TIME}{dir}{}",
            cols.join(", "),
            self.limit_by()
        ))
    }

    /// A select expression of a raw query; true when it reads a tag.
    pub(super) fn raw_expr(&self, e: &Expr) -> Result<(String, bool), PlanError> {
        if let Expr::VarRef { name, data_type } = e {
            if let Operand::Tag(t) = self.scope.resolve(name, *data_type) {
                return Ok((format!("nullIf(s.tags[{}], '')", quote_str(&t)), true));
            }
        }
        if let Expr::Literal(Literal::Regex(_)) | Expr::Wildcard(_) = e {
            return Err(PlanError::Invalid(format!("invalid select field: {e}")));
        }
        Ok((cond::sql(e, self.scope, "s.tags")?, false))
    }
}
