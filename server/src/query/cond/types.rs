//! InfluxDB's type check of arithmetic in a select field or condition: a string, a boolean or a
//! comparison cannot be added, multiplied or divided, and the statement fails with InfluxDB's
//! `type error: s::string + 2: incompatible types: string and integer`, where the engine would
//! refuse the whole query in its own words. A name that is no field of the measurement has no
//! type, and arithmetic with it is null, as InfluxDB answers for an unknown field; sluice
//! cannot tell a tag from an unknown name here, so a tag in arithmetic is null too (InfluxDB:
//! a type error).

use sluice_influxql::{BinaryOp, Expr, Literal};

use super::{Operand, Scope};
use crate::query::meta::field_type_name as field_type;
use crate::query::PlanError;

/// A value's type as InfluxDB names it, or none (an unknown name, or a tag: null).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Type {
    Known(&'static str),
    Unknown,
}

/// Whether `op` is arithmetic the type check covers.
pub(in crate::query) fn is_arithmetic(op: BinaryOp) -> bool {
    matches!(
        op,
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod
    )
}

/// The type of `e` in `scope`.
fn of(e: &Expr, scope: &Scope) -> Type {
    match e {
        Expr::VarRef { name, data_type } => match scope.resolve(name, *data_type) {
            Operand::Field(_, t) => Type::Known(field_type(t)),
            Operand::Time => Type::Known("time"),
            Operand::Tag(_) | Operand::Missing => Type::Unknown,
        },
        Expr::Literal(l) => Type::Known(match l {
            Literal::Integer(_) => "integer",
            Literal::Unsigned(_) => "unsigned",
            Literal::Float(_) => "float",
            Literal::String(_) => "string",
            Literal::Boolean(_) => "boolean",
            Literal::Duration(_) => "duration",
            Literal::Regex(_) => "regex",
        }),
        Expr::Paren(inner) => of(inner, scope),
        Expr::Binary { lhs, op, rhs } if is_arithmetic(*op) => {
            match (of(lhs, scope), of(rhs, scope)) {
                (Type::Unknown, t) | (t, Type::Unknown) => t,
                (Type::Known(a), Type::Known(b)) => match arithmetic(a, b) {
                    Some(t) => Type::Known(t),
                    None => Type::Unknown,
                },
            }
        }
        Expr::Binary { .. } => Type::Known("boolean"),
        Expr::Call { name, args } => call(name, args, scope),
        Expr::Wildcard(_) | Expr::Distinct(_) => Type::Unknown,
    }
}

/// The type of a call's value: a selector's is its field's, a count's an integer, the other
/// aggregates' and math's a float (math of anything but numbers is null, `cond::sql`).
fn call(name: &str, args: &[Expr], scope: &Scope) -> Type {
    match name {
        "count" => Type::Known("integer"),
        "first"
        | "last"
        | "min"
        | "max"
        | "mode"
        | "sum"
        | "spread"
        | "percentile"
        | "distinct"
        | "top"
        | "bottom"
        | "sample"
        | "difference"
        | "non_negative_difference"
        | "cumulative_sum" => match args.first() {
            Some(a @ Expr::VarRef { .. }) => of(a, scope),
            Some(a @ Expr::Call { .. }) => of(a, scope),
            _ => Type::Unknown,
        },
        _ => Type::Known("float"),
    }
}

/// Whether any of `args` is a string or a boolean: math of it is null.
pub(in crate::query) fn any_text(args: &[Expr], scope: &Scope) -> bool {
    args.iter()
        .any(|a| matches!(of(a, scope), Type::Known("string" | "boolean")))
}

/// The check of `lhs op rhs` (arithmetic) at its node: `Ok(false)` when it is null (an
/// operand without a type), `Ok(true)` when it computes, InfluxDB's type error otherwise.
pub(in crate::query) fn check(
    lhs: &Expr,
    op: BinaryOp,
    rhs: &Expr,
    scope: &Scope,
) -> Result<bool, PlanError> {
    match (of(lhs, scope), of(rhs, scope)) {
        (Type::Known(a), Type::Known(b)) if arithmetic(a, b).is_none() => {
            Err(type_error(lhs, op, rhs, a, b, scope))
        }
        (Type::Known(_), Type::Known(_)) => Ok(true),
        _ => Ok(false),
    }
}

fn type_error(lhs: &Expr, op: BinaryOp, rhs: &Expr, a: &str, b: &str, scope: &Scope) -> PlanError {
    PlanError::Invalid(format!(
        "type error: {} {op} {}: incompatible types: {a} and {b}",
        typed(lhs, scope),
        typed(rhs, scope)
    ))
}

/// The type of `a op b` for arithmetic between types `a` and `b`, or none where InfluxDB
/// refuses it.
fn arithmetic(a: &str, b: &str) -> Option<&'static str> {
    let numeric = |t: &str| matches!(t, "float" | "integer" | "unsigned");
    if !numeric(a) || !numeric(b) {
        return None;
    }
    Some(match (a, b) {
        ("float", _) | (_, "float") => "float",
        ("unsigned", _) | (_, "unsigned") => "unsigned",
        _ => "integer",
    })
}

/// Whether `lhs op rhs` (arithmetic) computes: both operands of types it takes. Otherwise it
/// is null, as InfluxDB evaluates it in a condition (a select field fails [`validate`] first).
pub(super) fn computes(lhs: &Expr, rhs: &Expr, scope: &Scope) -> bool {
    match (of(lhs, scope), of(rhs, scope)) {
        (Type::Known(a), Type::Known(b)) => arithmetic(a, b).is_some(),
        _ => false,
    }
}

/// InfluxDB's type check of a select field: its first arithmetic between types that do not
/// add up (operands before the operation, left before right), as InfluxDB's error.
pub(super) fn validate(e: &Expr, scope: &Scope) -> Result<(), PlanError> {
    match e {
        Expr::Paren(inner) => validate(inner, scope),
        Expr::Call { args, .. } => args.iter().try_for_each(|a| validate(a, scope)),
        Expr::Binary { lhs, op, rhs } => {
            validate(lhs, scope)?;
            validate(rhs, scope)?;
            if !is_arithmetic(*op) {
                return Ok(());
            }
            check(lhs, *op, rhs, scope).map(|_| ())
        }
        _ => Ok(()),
    }
}

/// `e` as InfluxDB prints it in a type error: fields with their types (`s::string`), a
/// sign as the `-1 * x` it was read as.
fn typed(e: &Expr, scope: &Scope) -> String {
    match e {
        Expr::VarRef { name, data_type } => match scope.resolve(name, *data_type) {
            Operand::Field(_, t) => format!("{}::{}", quoted(name), field_type(t)),
            _ => e.to_string(),
        },
        Expr::Paren(inner) => format!("({})", typed(inner, scope)),
        Expr::Call { name, args } => {
            let args: Vec<String> = args.iter().map(|a| typed(a, scope)).collect();
            format!("{name}({})", args.join(", "))
        }
        Expr::Binary { lhs, op, rhs } => {
            format!("{} {op} {}", typed(lhs, scope), typed(rhs, scope))
        }
        _ => e.to_string(),
    }
}

fn quoted(name: &str) -> String {
    sluice_influxql::quote_ident(name)
}
