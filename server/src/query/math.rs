//! InfluxQL's math functions (`abs`, `round`, `sqrt`, `pow`, `log`, ...), value by value as
//! InfluxDB 1.8 computes them: of a field's points, of an aggregate per bucket, in a select
//! list or a condition.
//!
//! InfluxDB keeps an integer an integer under `abs`, `ceil`, `floor` and `round`, answers
//! null where Go's math gives NaN (`sqrt(-1)`, `ln(-1)`), and rounds halves away from zero.
//! ClickHouse's `abs` of an `Int64` is a `UInt64` and its `round` of a float goes to the even
//! neighbour, so those are written out here.

use sluice_influxql::Expr;

use super::PlanError;

/// How many arguments a math function takes; `None` for any other name.
pub fn arity(name: &str) -> Option<usize> {
    match name {
        "abs" | "sin" | "cos" | "tan" | "asin" | "acos" | "atan" | "exp" | "ln" | "log2"
        | "log10" | "sqrt" | "ceil" | "floor" | "round" => Some(1),
        "atan2" | "log" | "pow" => Some(2),
        _ => None,
    }
}

pub fn is_math(name: &str) -> bool {
    arity(name).is_some()
}

/// Whether `e` calls a math function anywhere.
pub fn calls_math(e: &Expr) -> bool {
    let mut found = false;
    super::cond::visit(e, &mut |x| {
        found |= matches!(x, Expr::Call { name, .. } if is_math(name))
    });
    found
}

/// InfluxDB's error for a math call with the wrong number of arguments.
pub fn check_arity(name: &str, args: &[Expr]) -> Result<(), PlanError> {
    check_count(name, args.len())
}

fn check_count(name: &str, got: usize) -> Result<(), PlanError> {
    match arity(name) {
        Some(want) if want != got => Err(PlanError::Invalid(format!(
            "invalid number of arguments for {name}, expected {want}, got {got}"
        ))),
        _ => Ok(()),
    }
}

/// InfluxDB's checks of the math calls in a select field: each call's number of arguments,
/// and a variable somewhere in a field that calls one (`abs(1)` is refused).
pub fn check_calls(e: &Expr) -> Result<(), PlanError> {
    if !calls_math(e) {
        return Ok(());
    }
    let mut result = Ok(());
    let mut variable = false;
    super::cond::visit(e, &mut |x| match x {
        Expr::Call { name, args } if result.is_ok() => result = check_arity(name, args),
        Expr::VarRef { .. } | Expr::Wildcard(_) | Expr::Distinct(_) => variable = true,
        Expr::Literal(sluice_influxql::Literal::Regex(_)) => variable = true,
        _ => {}
    });
    result?;
    if !variable {
        return Err(PlanError::Invalid(
            "field must contain at least one variable".into(),
        ));
    }
    Ok(())
}

/// What stands around a transform (`abs(derivative(mean(v)))`, `derivative(mean(v)) * 8`),
/// applied to each of its values.
#[derive(Debug, Clone)]
pub enum Wrap {
    /// A math call: its name and its arguments, `None` where the transform's value goes, the
    /// others constants as SQL.
    Call {
        name: String,
        args: Vec<Option<String>>,
    },
    /// Arithmetic with a constant (SQL), the transform's value on the left or the right.
    Arithmetic {
        op: sluice_influxql::BinaryOp,
        constant: String,
        value_left: bool,
    },
}

/// The math calls and arithmetic with constants around a transform, outermost first, and the
/// transform's call; `None` unless `e` is such a chain.
pub fn around_transform(e: &Expr) -> Result<Option<(Vec<Wrap>, &Expr)>, PlanError> {
    around_call(e, &super::functions::is_transform)
}

/// The math calls and arithmetic with constants around a call whose name `inner` accepts,
/// outermost first, and the call; `None` unless `e` is such a chain with at least one wrap.
pub fn around_call<'e>(
    e: &'e Expr,
    inner: &dyn Fn(&str) -> bool,
) -> Result<Option<(Vec<Wrap>, &'e Expr)>, PlanError> {
    let mut wraps = Vec::new();
    let mut at = e;
    loop {
        match at {
            Expr::Call { name, args } if is_math(name) => {
                check_arity(name, args)?;
                let mut inner = None;
                let mut sql_args = Vec::new();
                for a in args {
                    match a {
                        Expr::Literal(l) => sql_args.push(Some(super::cond::literal_sql(l)?)),
                        other if inner.is_none() => {
                            inner = Some(other);
                            sql_args.push(None);
                        }
                        _ => return Ok(None),
                    }
                }
                let Some(inner) = inner else {
                    return Ok(None);
                };
                wraps.push(Wrap::Call {
                    name: name.clone(),
                    args: sql_args,
                });
                at = inner;
            }
            Expr::Binary { lhs, op, rhs } => {
                if arithmetic(*op).is_none() {
                    return Ok(None);
                }
                let op = *op;
                let (inner, constant, value_left) = match (&**lhs, &**rhs) {
                    (x, Expr::Literal(l)) if !matches!(x, Expr::Literal(_)) => (x, l, true),
                    (Expr::Literal(l), x) if !matches!(x, Expr::Literal(_)) => (x, l, false),
                    _ => return Ok(None),
                };
                wraps.push(Wrap::Arithmetic {
                    op,
                    constant: super::cond::literal_sql(constant)?,
                    value_left,
                });
                at = inner;
            }
            Expr::Paren(inner) => at = inner,
            Expr::Call { name, .. } if inner(name) && !wraps.is_empty() => {
                return Ok(Some((wraps, at)))
            }
            _ => return Ok(None),
        }
    }
}

/// The SQL of an arithmetic operator of a select field.
pub fn arithmetic(op: sluice_influxql::BinaryOp) -> Option<&'static str> {
    use sluice_influxql::BinaryOp;
    Some(match op {
        BinaryOp::Add => "+",
        BinaryOp::Sub => "-",
        BinaryOp::Mul => "*",
        BinaryOp::Div => "/",
        BinaryOp::Mod => "%",
        _ => return None,
    })
}

/// `a op b` in SQL for an arithmetic operator, with InfluxDB 1.8's answers where the engine's
/// differ: a division by zero is 0 (the engine's infinity or NaN would answer null), and an
/// integer's modulo by zero is 0 (the engine refuses the whole query; a float's is NaN, null,
/// in both).
pub fn arithmetic_sql(
    a: &str,
    op: sluice_influxql::BinaryOp,
    b: &str,
) -> Result<String, PlanError> {
    use sluice_influxql::BinaryOp;
    Ok(match op {
        BinaryOp::Div => bind2(a, b, |a, b| format!("if({b} = 0, 0, {a} / {b})")),
        BinaryOp::Mod => format!("moduloOrZero({a}, {b})"),
        other => match arithmetic(other) {
            Some(sql) => format!("({a} {sql} {b})"),
            None => {
                return Err(PlanError::Invalid(format!(
                    "invalid operator {other:?} in a select field"
                )))
            }
        },
    })
}

/// SQL that uses the value of `sql` more than once, as `body` of a name for it. Written out at
/// each use, a value that holds such uses itself doubles at each level of nesting (24 nested
/// `sqrt()` calls, 200 bytes of InfluxQL, made gigabytes of SQL); under an alias the engine
/// expands it at each use all the same (5 nested `round(abs())` exceeded its 500,000 nodes).
/// A lambda's parameter is not expanded: a computed value is passed once to
/// `arrayMap(x -> body, [value])`, and `body` names only the parameter (no column or aggregate
/// inside the lambda). A column or a constant (no call in it) is used as it is.
pub(super) fn bind(sql: &str, body: impl FnOnce(&str) -> String) -> String {
    if is_atom(sql) {
        return body(sql);
    }
    format!("arrayMap(__sl_x -> {}, [{sql}])[1]", body("__sl_x"))
}

/// [`bind`] for two values.
fn bind2(a: &str, b: &str, body: impl FnOnce(&str, &str) -> String) -> String {
    if is_atom(a) && is_atom(b) {
        return body(a, b);
    }
    format!(
        "arrayMap((__sl_a, __sl_b) -> {}, [{a}], [{b}])[1]",
        body("__sl_a", "__sl_b")
    )
}

/// A name or a literal: SQL without a call or a parenthesis, cheap to write more than once.
fn is_atom(sql: &str) -> bool {
    !sql.contains('(')
}

/// `wraps` applied to `inner` (SQL), innermost first.
pub fn apply(wraps: &[Wrap], inner: String) -> Result<String, PlanError> {
    let mut x = inner;
    for w in wraps.iter().rev() {
        x = match w {
            Wrap::Call { name, args } => {
                let args: Vec<String> = args
                    .iter()
                    .map(|a| a.clone().unwrap_or_else(|| x.clone()))
                    .collect();
                sql(name, &args)?
            }
            Wrap::Arithmetic {
                op,
                constant,
                value_left: true,
            } => arithmetic_sql(&x, *op, constant)?,
            Wrap::Arithmetic {
                op,
                constant,
                value_left: false,
            } => arithmetic_sql(constant, *op, &x)?,
        };
    }
    Ok(x)
}

/// `name(args)` in SQL, each argument already SQL. `+ 0` turns a float's `-0` into `0`, as
/// InfluxDB answers `round(-0.4)`; an integer stays an integer.
pub fn sql(name: &str, args: &[String]) -> Result<String, PlanError> {
    check_count(name, args.len())?;
    let Some(x) = args.first() else {
        return Err(PlanError::Invalid(format!(
            "{name}() is not a math function"
        )));
    };
    // Each value once (see `bind`): NaN and infinities become NULL in one call.
    let finite = |v: String| format!("ifNotFinite({v}, NULL)");
    Ok(match name {
        "abs" => bind(x, |x| format!("({x} - 2 * least({x}, 0) + 0)")),
        "ceil" | "floor" => format!("({name}({x}) + 0)"),
        "round" => bind(x, |x| {
            format!("(if(abs({x} - trunc({x})) >= 0.5, trunc({x}) + sign({x}), trunc({x})) + 0)")
        }),
        "ln" => finite(format!("log({x})")),
        "log" => finite(format!("log({x}) / log({})", args[1])),
        "pow" | "atan2" => finite(format!("{name}({x}, {})", args[1])),
        other => finite(format!("{other}({x})")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arity_errors_are_influxdbs() {
        let e = sql("pow", &["x".into()]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid number of arguments for pow, expected 2, got 1"
        );
        assert!(sql("abs", &[]).is_err());
        assert!(sql("abs", &["x".into()]).is_ok());
        assert!(!is_math("mean") && is_math("atan2"));
    }

    #[test]
    fn math_around_a_transform_applies_to_its_values() {
        let stmt = match sluice_influxql::parse("SELECT pow(abs(derivative(mean(v))), 2) FROM m")
            .map(|mut s| s.remove(0))
        {
            Ok(sluice_influxql::Statement::Select(s)) => *s,
            other => panic!("{other:?}"),
        };
        let (wraps, t) = around_transform(&stmt.fields[0].expr).unwrap().unwrap();
        assert!(matches!(t, Expr::Call { name, .. } if name == "derivative"));
        let sql = apply(&wraps, "d".into()).unwrap();
        assert_eq!(sql, "ifNotFinite(pow((d - 2 * least(d, 0) + 0), 2), NULL)");
        let sql = apply(&wraps, "f(d)".into()).unwrap();
        assert!(
            sql.starts_with("ifNotFinite(pow(arrayMap(__sl_x -> (__sl_x - 2 * least(__sl_x, 0) + 0), [f(d)])[1]"),
            "{sql}"
        );
        // Not a transform inside: the aggregate path plans it.
        let plain = Expr::Call {
            name: "abs".into(),
            args: vec![Expr::VarRef {
                name: "v".into(),
                data_type: None,
            }],
        };
        assert!(around_transform(&plain).unwrap().is_none());
    }

    #[test]
    fn nan_and_infinity_become_null() {
        assert_eq!(
            sql("sqrt", &["v".into()]).unwrap(),
            "ifNotFinite(sqrt(v), NULL)"
        );
        assert!(sql("log", &["v".into(), "2".into()])
            .unwrap()
            .contains("log(v) / log(2)"));
    }

    /// Math and arithmetic nested many times over: the SQL grows with the nesting, not
    /// exponentially (24 nested `sqrt()` calls once took gigabytes of memory to plan).
    #[test]
    fn nested_math_and_divisions_grow_linearly() {
        let mut x = "v".to_string();
        for i in 0..16 {
            x = match i % 4 {
                0 => sql("abs", &[x]).unwrap(),
                1 => sql("round", &[x]).unwrap(),
                2 => sql("sqrt", &[x]).unwrap(),
                _ => arithmetic_sql("1", sluice_influxql::BinaryOp::Div, &x).unwrap(),
            };
        }
        assert!(x.len() < 16 * 200, "{} bytes", x.len());
    }

    #[test]
    fn a_division_or_modulo_by_zero_is_influxdbs_0() {
        use sluice_influxql::BinaryOp;
        let div = arithmetic_sql("a", BinaryOp::Div, "b").unwrap();
        assert_eq!(div, "if(b = 0, 0, a / b)");
        let div = arithmetic_sql("a", BinaryOp::Div, "sqrt(b)").unwrap();
        assert_eq!(
            div,
            "arrayMap((__sl_a, __sl_b) -> if(__sl_b = 0, 0, __sl_a / __sl_b), [a], [sqrt(b)])[1]"
        );
        assert_eq!(
            arithmetic_sql("a", BinaryOp::Mod, "b").unwrap(),
            "moduloOrZero(a, b)"
        );
        assert_eq!(arithmetic_sql("a", BinaryOp::Add, "b").unwrap(), "(a + b)");
    }
}
