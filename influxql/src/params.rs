//! Bound parameters: `$name` in a query, given a value by the request's `params`.
//!
//! InfluxDB 1.8 binds a parameter while it scans: the `$name` token becomes a token of the
//! value's kind (an identifier, a string, a number, ...), so a parameter can stand wherever
//! such a token can (`FROM $m` with an identifier, `LIMIT $n` with an integer, `=~ $re` with
//! a regex), and errors name the place of the `$`. A value InfluxDB cannot bind is kept as an
//! error that surfaces only if the parameter is used. sluice binds the same way, in the
//! scanner, so acceptance and messages stay InfluxDB's.

use std::collections::HashMap;

use crate::token::{Kw, Tok};

/// A parameter's value, as InfluxDB 1.8 binds it from JSON: a string is a string literal, a
/// number with a `.` a float and one without an integer, a boolean a boolean; an object of
/// one entry names the kind (`{"identifier": "cpu"}`, `{"regex": "^a"}`, `{"duration": "5m"}`,
/// `{"integer": 2}`, `{"float": 2}`, `{"string": "a"}`).
#[derive(Debug, Clone, PartialEq)]
pub enum BoundValue {
    Identifier(String),
    String(String),
    Regex(String),
    Number(f64),
    Integer(i64),
    Boolean(bool),
    /// Duration text such as `5m`; checked where it is used, as InfluxDB does.
    Duration(String),
    /// A value that cannot be bound, with InfluxDB's words for why; using the parameter
    /// fails the query with them.
    Error(String),
}

/// Parameters by name, without the `$`.
pub type Params = HashMap<String, BoundValue>;

impl BoundValue {
    /// The token the parameter's `$name` stands for.
    pub(crate) fn token(&self) -> Tok {
        match self {
            BoundValue::Identifier(s) => Tok::Ident(s.clone()),
            BoundValue::String(s) => Tok::Str(s.clone()),
            BoundValue::Regex(s) => Tok::Regex(s.clone()),
            // Go's `FormatFloat(v, 'f', -1, 64)`: the shortest digits, never an exponent,
            // which is also how Rust prints an `f64`.
            BoundValue::Number(v) => Tok::Number(v.to_string()),
            BoundValue::Integer(v) => Tok::Integer(v.to_string()),
            BoundValue::Boolean(true) => Tok::Keyword(Kw::True),
            BoundValue::Boolean(false) => Tok::Keyword(Kw::False),
            BoundValue::Duration(s) => Tok::Duration(s.clone()),
            // Still a parameter, named by the error: where an operand is expected InfluxDB
            // 1.8 reports it as `missing parameter: <why>`, elsewhere as what it found.
            BoundValue::Error(why) => Tok::BoundParam(why.clone()),
        }
    }
}

/// The token a `$name` stands for under `params`, or `None` to keep the parameter as it is
/// (an unknown or empty name).
pub(crate) fn bind(param: &str, params: &Params) -> Option<Tok> {
    let name = param.strip_prefix('$').unwrap_or(param);
    if name.is_empty() {
        return None;
    }
    params.get(name).map(BoundValue::token)
}

#[cfg(test)]
mod tests {
    use super::BoundValue::{self, Boolean, Error, Identifier, Integer, Number};
    use crate::ast::{MeasurementName, SelectStatement, Statement};
    use crate::parse_with_params;

    fn params(pairs: &[(&str, BoundValue)]) -> super::Params {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    fn select(q: &str, p: &[(&str, BoundValue)]) -> SelectStatement {
        match parse_with_params(q, &params(p)).unwrap().remove(0) {
            Statement::Select(s) => *s,
            other => panic!("not a SELECT: {other:?}"),
        }
    }

    fn err(q: &str, p: &[(&str, BoundValue)]) -> String {
        parse_with_params(q, &params(p)).unwrap_err().to_string()
    }

    #[test]
    fn values_stand_where_their_kind_of_token_can() {
        let s = select(
            "SELECT $f FROM $m WHERE host = $h AND usage > -$v GROUP BY time($i) LIMIT $n",
            &[
                ("f", Identifier("select".into())),
                ("m", Identifier("cpu".into())),
                ("h", BoundValue::String("a'b".into())),
                ("v", Integer(i64::MIN)),
                ("i", BoundValue::Duration("5m".into())),
                ("n", Integer(2)),
            ],
        );
        assert_eq!(
            s.to_string(),
            "SELECT \"select\" FROM cpu WHERE host = 'a\\'b' AND usage > -9223372036854775808 \
             GROUP BY time(5m) LIMIT 2"
        );
        let s = select(
            "SELECT usage FROM cpu WHERE usage > $x AND ok = $b",
            &[("x", Number(2.0)), ("b", Boolean(true))],
        );
        assert_eq!(
            s.to_string(),
            "SELECT usage FROM cpu WHERE usage > 2.0 AND ok = true"
        );
    }

    #[test]
    fn regexes_bind_where_a_regex_may_start() {
        let re = || ("re", BoundValue::Regex("^c".into()));
        let s = select(
            "SELECT usage FROM $re WHERE host =~ $re GROUP BY $re",
            &[re()],
        );
        assert_eq!(
            s.to_string(),
            "SELECT usage FROM /^c/ WHERE host =~ /^c/ GROUP BY /^c/"
        );
        let stmts = parse_with_params(
            "SHOW MEASUREMENTS WITH MEASUREMENT =~ $re; SHOW TAG VALUES WITH KEY =~ $re",
            &params(&[re()]),
        )
        .unwrap();
        assert!(matches!(&stmts[0], Statement::ShowMeasurements(m)
            if m.with_measurement.as_ref().is_some_and(|m| m.name == MeasurementName::Regex(crate::ast::Regex("^c".into())))));
        assert!(matches!(&stmts[1], Statement::ShowTagValues(_)));
    }

    /// InfluxDB 1.8's answers to the same queries and parameters.
    #[test]
    fn errors_are_influxdbs() {
        let q = "SELECT usage FROM $m";
        assert_eq!(
            err(q, &[("m", BoundValue::String("cpu".into()))]),
            "found cpu, expected identifier at line 1, char 19"
        );
        let why = "unable to bind parameter with type <nil>";
        assert_eq!(
            err(q, &[("m", Error(why.into()))]),
            format!("found {why}, expected identifier at line 1, char 19")
        );
        let q = "SELECT usage FROM cpu WHERE usage > $v";
        assert_eq!(
            err(q, &[("v", Error(why.into()))]),
            format!("missing parameter: {why}")
        );
        assert_eq!(err(q, &[]), "missing parameter: v");
        assert_eq!(
            err("SELECT usage FROM cpu WHERE usage > $", &[]),
            "empty bound parameter"
        );
        assert_eq!(
            err(
                "SELECT usage FROM cpu WHERE host =~ $re",
                &[("re", BoundValue::String("^a".into()))]
            ),
            "found ^a, expected regex at line 1, char 37"
        );
        let q = "SELECT usage FROM cpu LIMIT $n";
        assert_eq!(
            err(q, &[("n", Number(1.5))]),
            "found 1.5, expected integer at line 1, char 29"
        );
        assert_eq!(
            err(q, &[("n", Integer(-1))]),
            "LIMIT must be >= 0 at line 1, char 29"
        );
    }

    #[test]
    fn quoted_names_bind_and_other_dollars_do_not() {
        let s = select(
            "SELECT usage FROM cpu WHERE host = $\"h x\" AND dc = '$h'",
            &[
                ("h x", BoundValue::String("a".into())),
                ("h", BoundValue::String("b".into())),
            ],
        );
        assert_eq!(
            s.to_string(),
            "SELECT usage FROM cpu WHERE host = 'a' AND dc = '$h'"
        );
    }
}
