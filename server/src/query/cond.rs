//! InfluxQL expressions as ClickHouse SQL over one measurement table (`m`) and its series'
//! tags (`s.tags`), and the time range InfluxDB takes out of a `WHERE` clause.
//!
//! A name is a field when the measurement has a field of that name, else a tag (a `::tag` or
//! `::field` cast decides instead), as InfluxDB resolves it. A missing tag reads as `''`, which
//! is what InfluxDB compares it as too.

use std::collections::BTreeMap;

use sluice_core::names::{quote_ident, quote_str};
use sluice_core::FieldType;
use sluice_influxql::{BinaryOp, DataType, Expr, Literal};

use super::PlanError;

/// What a name in a query refers to in one measurement.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    Time,
    /// A field as SQL (its column, or the column cast as `::integer` asks), of this type.
    Field(String, FieldType),
    Tag(String),
    /// A field cast to a type the measurement does not have it as, or absent: always null.
    Missing,
}

/// The measurement a condition or select list is read against, and the query's `now()`.
pub struct Scope<'a> {
    pub fields: &'a BTreeMap<String, FieldType>,
    pub now_ns: i64,
}

impl Scope<'_> {
    pub fn resolve(&self, name: &str, cast: Option<DataType>) -> Operand {
        if name == "time" && cast.is_none() {
            return Operand::Time;
        }
        let field = self.fields.get(name).copied();
        match (cast, field) {
            (Some(DataType::Tag), _) => Operand::Tag(name.to_string()),
            (None, None) => Operand::Tag(name.to_string()),
            (None | Some(DataType::Field), Some(t)) => Operand::Field(column(name), t),
            (Some(want), Some(t)) if cast_matches(want, t) => Operand::Field(column(name), t),
            (Some(want), Some(t)) => match numeric_cast(want, t) {
                Some((f, to)) => Operand::Field(format!("{f}({})", column(name)), to),
                None => Operand::Missing,
            },
            _ => Operand::Missing,
        }
    }
}

fn column(name: &str) -> String {
    format!("m.{}", quote_ident(name))
}

/// InfluxDB casts numbers between floats, integers and unsigned (`"f"::integer` truncates
/// toward zero, a negative number wraps as unsigned); any other cast is null.
fn numeric_cast(want: DataType, have: FieldType) -> Option<(&'static str, FieldType)> {
    let numeric = matches!(
        have,
        FieldType::Float | FieldType::Integer | FieldType::UInteger
    );
    match want {
        _ if !numeric => None,
        DataType::Float => Some(("toFloat64", FieldType::Float)),
        DataType::Integer => Some(("toInt64", FieldType::Integer)),
        DataType::Unsigned => Some(("toUInt64", FieldType::UInteger)),
        _ => None,
    }
}

fn cast_matches(want: DataType, have: FieldType) -> bool {
    matches!(
        (want, have),
        (DataType::Float, FieldType::Float)
            | (DataType::Integer, FieldType::Integer)
            | (DataType::Unsigned, FieldType::UInteger)
            | (DataType::String, FieldType::String)
            | (DataType::Boolean, FieldType::Boolean)
    )
}

/// Inclusive bounds in nanoseconds since the epoch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeRange {
    pub min: Option<i64>,
    pub max: Option<i64>,
}

impl TimeRange {
    /// One interval more before the range (`descending`: after it), for the transforms that
    /// InfluxDB gives a bucket to compare the range's first one with ([`super::functions::
    /// reads_a_bucket_more`]). An open end stays open.
    pub fn widen(&mut self, every: i64, descending: bool) {
        if descending {
            self.max = self.max.map(|t| t.saturating_add(every));
        } else {
            self.min = self.min.map(|t| t.saturating_sub(every));
        }
    }

    fn narrow(&mut self, op: BinaryOp, t: i64) {
        let (lo, hi) = match op {
            BinaryOp::Gt => (Some(t.saturating_add(1)), None),
            BinaryOp::GtEq => (Some(t), None),
            BinaryOp::Lt => (None, Some(t.saturating_sub(1))),
            BinaryOp::LtEq => (None, Some(t)),
            BinaryOp::Eq => (Some(t), Some(t)),
            _ => (None, None),
        };
        if let Some(lo) = lo {
            self.min = Some(self.min.map_or(lo, |m| m.max(lo)));
        }
        if let Some(hi) = hi {
            self.max = Some(self.max.map_or(hi, |m| m.min(hi)));
        }
    }
}

/// A `WHERE` clause taken apart: conditions on tags alone (they select series, and run on the
/// series table), the rest (on rows), and the time range.
#[derive(Debug, Default)]
pub struct Where {
    pub range: TimeRange,
    /// The range the statement asked for, where a transform had [`TimeRange::widen`] read a
    /// bucket more: that bucket's rows feed the transform and are not answered.
    pub asked: Option<TimeRange>,
    /// SQL over the series table's `tags` column.
    pub series: Vec<String>,
    /// SQL over `m` (the measurement table) and `s.tags`.
    pub rows: Vec<String>,
    /// Whether `rows` reads `s.tags` (the query then joins the series table).
    pub rows_use_tags: bool,
}

/// Splits `cond` at its top-level `AND`s and translates each part.
pub fn split(cond: Option<&Expr>, scope: &Scope) -> Result<Where, PlanError> {
    let mut out = Where::default();
    let mut parts = Vec::new();
    if let Some(c) = cond {
        conjuncts(c, &mut parts);
    }
    for part in parts {
        if let Some((op, t)) = time_bound(part, scope)? {
            out.range.narrow(op, t);
            continue;
        }
        let refs = references(part, scope);
        if refs.time {
            return Err(PlanError::Invalid(format!(
                "invalid time condition: {part} (compare time with a constant, at the top level)"
            )));
        }
        if refs.tags && !refs.fields {
            out.series.push(sql(part, scope, "tags")?);
        } else {
            out.rows_use_tags |= refs.tags;
            out.rows.push(sql(part, scope, "s.tags")?);
        }
    }
    if let (Some(lo), Some(hi)) = (out.range.min, out.range.max) {
        if lo > hi {
            // An empty range: no row can match.
            out.rows.push("0".into());
        }
    }
    Ok(out)
}

/// SQL over the series table's `tags`, each true for every series `cond` can select, as
/// InfluxDB's index reads a condition before it reads a point: a tag comparison as it is,
/// what reads a field (or nothing) as true. `SLIMIT` counts the groups of these series.
pub fn series_superset(cond: Option<&Expr>, scope: &Scope) -> Result<Vec<String>, PlanError> {
    let mut parts = Vec::new();
    if let Some(c) = cond {
        conjuncts(c, &mut parts);
    }
    let mut out = Vec::new();
    for part in parts {
        if time_bound(part, scope)?.is_none() {
            out.extend(tag_part(part, scope)?);
        }
    }
    Ok(out)
}

/// `e` with what reads a field taken as true: `None` where the whole is.
fn tag_part(e: &Expr, scope: &Scope) -> Result<Option<String>, PlanError> {
    Ok(match e {
        Expr::Paren(inner) => tag_part(inner, scope)?,
        Expr::Binary {
            lhs,
            op: op @ (BinaryOp::And | BinaryOp::Or),
            rhs,
        } => match (tag_part(lhs, scope)?, tag_part(rhs, scope)?, op) {
            (Some(a), Some(b), BinaryOp::And) => Some(format!("({a} AND {b})")),
            (Some(a), Some(b), _) => Some(format!("({a} OR {b})")),
            // One side holds every series.
            (a, b, BinaryOp::And) => a.or(b),
            _ => None,
        },
        other => {
            let refs = references(other, scope);
            if refs.tags && !refs.fields && !refs.time {
                Some(sql(other, scope, "tags")?)
            } else {
                None
            }
        }
    })
}

/// The conditions joined by top-level `AND`s (through parentheses).
pub(super) fn conjuncts<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::Binary {
            lhs,
            op: BinaryOp::And,
            rhs,
        } => {
            conjuncts(lhs, out);
            conjuncts(rhs, out);
        }
        Expr::Paren(inner) => conjuncts(inner, out),
        other => out.push(other),
    }
}

/// `time <op> <constant>` (either way round) as the bound it sets.
fn time_bound(e: &Expr, scope: &Scope) -> Result<Option<(BinaryOp, i64)>, PlanError> {
    let Expr::Binary { lhs, op, rhs } = e else {
        return Ok(None);
    };
    let is_time = |x: &Expr| matches!(x, Expr::VarRef { name, data_type: None } if name == "time");
    let (op, other) = if is_time(lhs) {
        (*op, rhs)
    } else if is_time(rhs) {
        (flip(*op), lhs)
    } else {
        return Ok(None);
    };
    if !matches!(
        op,
        BinaryOp::Gt | BinaryOp::GtEq | BinaryOp::Lt | BinaryOp::LtEq | BinaryOp::Eq
    ) {
        return Err(PlanError::Invalid(format!("invalid time comparison: {e}")));
    }
    match time_constant(other, scope.now_ns) {
        Some(t) => Ok(Some((op, t))),
        None => Err(PlanError::Invalid(format!(
            "invalid time value in {e}: use an RFC 3339 string, an integer with a unit such as 1700000000000ms, or now() - 1h"
        ))),
    }
}

fn flip(op: BinaryOp) -> BinaryOp {
    match op {
        BinaryOp::Gt => BinaryOp::Lt,
        BinaryOp::GtEq => BinaryOp::LtEq,
        BinaryOp::Lt => BinaryOp::Gt,
        BinaryOp::LtEq => BinaryOp::GtEq,
        other => other,
    }
}

/// A constant point in time: `now()`, an RFC 3339 string, an integer (nanoseconds), a duration
/// literal (`1700000000000ms`), and sums and differences of those.
pub fn time_constant(e: &Expr, now_ns: i64) -> Option<i64> {
    match e {
        Expr::Call { name, args } if name == "now" && args.is_empty() => Some(now_ns),
        Expr::Literal(Literal::String(s)) => super::time::parse_rfc3339(s),
        Expr::Literal(Literal::Integer(n)) => Some(*n),
        Expr::Literal(Literal::Duration(d)) => Some(d.as_nanos()),
        Expr::Paren(inner) => time_constant(inner, now_ns),
        Expr::Binary { lhs, op, rhs } => {
            let (a, b) = (time_constant(lhs, now_ns)?, time_constant(rhs, now_ns)?);
            match op {
                BinaryOp::Add => a.checked_add(b),
                BinaryOp::Sub => a.checked_sub(b),
                _ => None,
            }
        }
        _ => None,
    }
}

#[derive(Default)]
struct Refs {
    time: bool,
    tags: bool,
    fields: bool,
}

fn references(e: &Expr, scope: &Scope) -> Refs {
    let mut r = Refs::default();
    visit(e, &mut |x| {
        if let Expr::VarRef { name, data_type } = x {
            match scope.resolve(name, *data_type) {
                Operand::Time => r.time = true,
                Operand::Tag(_) => r.tags = true,
                Operand::Field(..) | Operand::Missing => r.fields = true,
            }
        }
    });
    r
}

/// Calls `f` on `e` and every expression inside it (bounded by the parser's height limit).
pub fn visit(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    f(e);
    match e {
        Expr::Binary { lhs, rhs, .. } => {
            visit(lhs, f);
            visit(rhs, f);
        }
        Expr::Paren(inner) => visit(inner, f),
        Expr::Call { args, .. } => args.iter().for_each(|a| visit(a, f)),
        _ => {}
    }
}

/// The SQL of an operand: a field of `m`, a tag of `tags` (`s.tags` or the series table's own).
pub fn operand_sql(op: &Operand, tags: &str) -> String {
    match op {
        Operand::Time => "m.time".into(),
        Operand::Field(sql, _) => sql.clone(),
        Operand::Tag(name) => format!("{tags}[{}]", quote_str(name)),
        Operand::Missing => "NULL".into(),
    }
}

/// A literal as SQL.
pub fn literal_sql(l: &Literal) -> Result<String, PlanError> {
    Ok(match l {
        Literal::Integer(n) => n.to_string(),
        Literal::Unsigned(n) => n.to_string(),
        Literal::Float(f) if f.is_finite() => format!("{f:?}"),
        Literal::Float(_) => "NULL".into(),
        Literal::String(s) => quote_str(s),
        Literal::Boolean(b) => b.to_string(),
        Literal::Duration(d) => d.as_nanos().to_string(),
        Literal::Regex(r) => {
            return Err(PlanError::Invalid(format!(
                "a regular expression (/{}/) can only follow =~ or !~",
                r.as_str()
            )))
        }
    })
}

/// A select field's value as SQL, after InfluxDB's type check of its arithmetic.
pub fn field_sql(e: &Expr, scope: &Scope, tags: &str) -> Result<String, PlanError> {
    types::validate(e, scope)?;
    sql(e, scope, tags)
}

/// A condition (or a value expression inside one) as SQL.
pub fn sql(e: &Expr, scope: &Scope, tags: &str) -> Result<String, PlanError> {
    match e {
        Expr::VarRef { name, data_type } => Ok(operand_sql(&scope.resolve(name, *data_type), tags)),
        Expr::Literal(l) => literal_sql(l),
        Expr::Paren(inner) => Ok(format!("({})", sql(inner, scope, tags)?)),
        Expr::Binary { lhs, op, rhs } => binary_sql(lhs, *op, rhs, scope, tags),
        Expr::Call { name, args } if super::math::is_math(name) => {
            super::math::check_arity(name, args)?;
            // InfluxDB's math of a string, a boolean or a tag is null.
            if !args.iter().all(|a| numeric(a, scope)) {
                return Ok("NULL".into());
            }
            let args = args
                .iter()
                .map(|a| sql(a, scope, tags))
                .collect::<Result<Vec<_>, _>>()?;
            super::math::sql(name, &args)
        }
        Expr::Call { name, .. } => Err(PlanError::Unsupported(format!(
            "{name}() in a condition: only fields, tags, time and constants can be compared"
        ))),
        Expr::Wildcard(_) | Expr::Distinct(_) => Err(PlanError::Invalid(format!(
            "invalid expression in a condition: {e}"
        ))),
    }
}

/// Whether `e` can be a number: not a tag, a string or boolean field, or a string literal.
fn numeric(e: &Expr, scope: &Scope) -> bool {
    match e {
        Expr::VarRef { name, data_type } => match scope.resolve(name, *data_type) {
            Operand::Field(_, t) => matches!(
                t,
                FieldType::Float | FieldType::Integer | FieldType::UInteger
            ),
            Operand::Missing => true,
            Operand::Tag(_) | Operand::Time => false,
        },
        Expr::Literal(l) => !matches!(l, Literal::String(_) | Literal::Boolean(_)),
        Expr::Paren(inner) => numeric(inner, scope),
        _ => true,
    }
}

/// `k = 'a' OR k = 'b' ...` over one tag `k` (any parentheses), as `k IN ('a', 'b', ...)`:
/// the engine tests one set per series where it tested each equality in turn (the series
/// lookup of 8 hosts out of 10,000: 3.5 -> 2.2 ms). `None` for any other `OR`.
fn one_tag_in(lhs: &Expr, rhs: &Expr, scope: &Scope, tags: &str) -> Option<String> {
    fn leaves<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
        match e {
            Expr::Paren(inner) => leaves(inner, out),
            Expr::Binary {
                lhs,
                op: BinaryOp::Or,
                rhs,
            } => {
                leaves(lhs, out);
                leaves(rhs, out);
            }
            other => out.push(other),
        }
    }
    let mut all = Vec::new();
    leaves(lhs, &mut all);
    leaves(rhs, &mut all);
    let mut key: Option<String> = None;
    let mut values = Vec::new();
    for leaf in all {
        let Expr::Binary {
            lhs,
            op: BinaryOp::Eq,
            rhs,
        } = leaf
        else {
            return None;
        };
        let (name, data_type, value) = match (&**lhs, &**rhs) {
            (Expr::VarRef { name, data_type }, Expr::Literal(Literal::String(v)))
            | (Expr::Literal(Literal::String(v)), Expr::VarRef { name, data_type }) => {
                (name, data_type, v)
            }
            _ => return None,
        };
        let Operand::Tag(k) = scope.resolve(name, *data_type) else {
            return None;
        };
        if *key.get_or_insert_with(|| k.clone()) != k {
            return None;
        }
        values.push(quote_str(value));
    }
    let subject = operand_sql(&Operand::Tag(key?), tags);
    Some(format!("({subject} IN ({}))", values.join(", ")))
}

fn binary_sql(
    lhs: &Expr,
    op: BinaryOp,
    rhs: &Expr,
    scope: &Scope,
    tags: &str,
) -> Result<String, PlanError> {
    if op == BinaryOp::Or {
        if let Some(set) = one_tag_in(lhs, rhs, scope, tags) {
            return Ok(set);
        }
    }
    if let BinaryOp::EqRegex | BinaryOp::NotEqRegex = op {
        let Expr::Literal(Literal::Regex(re)) = rhs else {
            return Err(PlanError::Invalid(format!(
                "the right side of {} must be a regular expression",
                if op == BinaryOp::EqRegex { "=~" } else { "!~" }
            )));
        };
        // A computed subject once (`math::bind`): a regex match of a regex match, nested,
        // would double at each level.
        let subject = sql(lhs, scope, tags)?;
        let re = quote_str(re.as_str());
        let matched = |x: &str| format!("({x} IS NOT NULL AND match(toString({x}), {re}))");
        let matched = match lhs {
            Expr::VarRef { .. } => matched(&subject),
            _ => super::math::bind(&subject, matched),
        };
        return Ok(if op == BinaryOp::EqRegex {
            matched
        } else {
            format!("NOT {matched}")
        });
    }
    // A tag compared with anything but a string matches nothing, as in InfluxDB.
    let tag_vs_non_string = |a: &Expr, b: &Expr| {
        matches!(a, Expr::VarRef { name, data_type } if matches!(scope.resolve(name, *data_type), Operand::Tag(_)))
            && matches!(b, Expr::Literal(l) if !matches!(l, Literal::String(_)))
    };
    if op.is_condition()
        && !matches!(op, BinaryOp::And | BinaryOp::Or)
        && (tag_vs_non_string(lhs, rhs) || tag_vs_non_string(rhs, lhs))
    {
        return Ok("0".into());
    }
    if types::is_arithmetic(op) && !types::computes(lhs, rhs, scope) {
        return Ok("NULL".into());
    }
    let (a, b) = (sql(lhs, scope, tags)?, sql(rhs, scope, tags)?);
    Ok(match op {
        BinaryOp::BitAnd => format!("bitAnd({a}, {b})"),
        BinaryOp::BitOr => format!("bitOr({a}, {b})"),
        BinaryOp::BitXor => format!("bitXor({a}, {b})"),
        op if types::is_arithmetic(op) => super::math::arithmetic_sql(&a, op, &b)?,
        other => format!("({a} {} {b})", op_sql(other)),
    })
}

fn op_sql(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::And => "AND",
        BinaryOp::Or => "OR",
        BinaryOp::Eq => "=",
        BinaryOp::NotEq => "!=",
        BinaryOp::Lt => "<",
        BinaryOp::LtEq => "<=",
        BinaryOp::Gt => ">",
        BinaryOp::GtEq => ">=",
        // Handled before (arithmetic by `math::arithmetic_sql`).
        BinaryOp::Add
        | BinaryOp::Sub
        | BinaryOp::Mul
        | BinaryOp::Div
        | BinaryOp::Mod
        | BinaryOp::EqRegex
        | BinaryOp::NotEqRegex
        | BinaryOp::BitAnd
        | BinaryOp::BitOr
        | BinaryOp::BitXor => "=",
    }
}

#[cfg(test)]
mod tests;
pub(super) mod types;
