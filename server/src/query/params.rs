//! `/query`'s `params`: a JSON object giving `$name` parameters their values, decoded as
//! InfluxDB 1.8 decodes it, so that clients binding values (InfluxDB's Go and Python
//! clients do) get the same statements, and the same errors, as from InfluxDB.
//!
//! A number keeps its JSON text until it is bound: InfluxDB reads one with a `.` as a float
//! and any other as a 64-bit integer (`1e3` is refused as an integer), so the value cannot go
//! through a float first.

use std::collections::HashMap;

use serde_json::value::RawValue;
use sluice_influxql::{BoundValue, Params, Statement};

type Raw = HashMap<String, Box<RawValue>>;

/// Why a request's `params` cannot be used; InfluxDB answers both with 400.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ParamsError {
    #[error("error parsing query parameters: {0}")]
    Json(String),
    #[error("error parsing json value: {0}")]
    Number(String),
}

/// The statements of `q` with `params` (a JSON object, or nothing) bound. The outer error is
/// the request's (its parameters); the inner one the query's.
pub fn parse(
    q: &str,
    params: Option<&str>,
) -> Result<Result<Vec<Statement>, sluice_influxql::ParseError>, ParamsError> {
    match params.filter(|p| !p.is_empty()) {
        None => Ok(sluice_influxql::parse(q)),
        Some(text) => Ok(sluice_influxql::parse_with_params(q, &decode(text)?)),
    }
}

/// The values of a `params` object. Like Go's decoder, text after the object is ignored.
pub fn decode(text: &str) -> Result<Params, ParamsError> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<Raw>();
    let raw = match values.next() {
        Some(Ok(raw)) => raw,
        Some(Err(e)) => return Err(ParamsError::Json(e.to_string())),
        None => return Err(ParamsError::Json("unexpected end of JSON input".into())),
    };
    raw.into_iter()
        .map(|(name, value)| {
            let bound = match Json::of(&value) {
                // The handler reads numbers before binding, and refuses the request on one
                // it cannot read.
                Json::Number(text) => number(text)
                    .map_err(ParamsError::Number)
                    .map(Number::bound)?,
                other => top_level(other),
            };
            Ok((name, bound))
        })
        .collect()
}

/// A JSON value by its kind, as Go's decoder would hand it over.
enum Json<'a> {
    Null,
    Bool(bool),
    Number(&'a str),
    String(String),
    Array,
    Object(Raw),
}

impl<'a> Json<'a> {
    fn of(raw: &'a RawValue) -> Json<'a> {
        let text = raw.get();
        match text.as_bytes().first() {
            Some(b'n') => Json::Null,
            Some(b't') => Json::Bool(true),
            Some(b'f') => Json::Bool(false),
            Some(b'"') => Json::String(serde_json::from_str(text).unwrap_or_default()),
            Some(b'[') => Json::Array,
            Some(b'{') => Json::Object(serde_json::from_str(text).unwrap_or_default()),
            _ => Json::Number(text),
        }
    }
}

/// A JSON number as InfluxDB reads it.
#[derive(Debug, PartialEq)]
enum Number {
    Float(f64),
    Integer(i64),
}

impl Number {
    fn bound(self) -> BoundValue {
        match self {
            Number::Float(v) => BoundValue::Number(v),
            Number::Integer(v) => BoundValue::Integer(v),
        }
    }
}

/// Go's `json.Number` read by InfluxDB: `Float64` when the text has a `.`, else `Int64`,
/// with `strconv`'s words on failure.
fn number(text: &str) -> Result<Number, String> {
    if text.contains('.') {
        return match text.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(Number::Float(v)),
            _ => Err(format!(
                "strconv.ParseFloat: parsing {text:?}: value out of range"
            )),
        };
    }
    text.parse::<i64>().map(Number::Integer).map_err(|e| {
        use std::num::IntErrorKind::{NegOverflow, PosOverflow};
        let why = match e.kind() {
            PosOverflow | NegOverflow => "value out of range",
            _ => "invalid syntax",
        };
        format!("strconv.ParseInt: parsing {text:?}: {why}")
    })
}

/// A parameter's own value (numbers are read before).
fn top_level(value: Json) -> BoundValue {
    let cannot =
        |go_type: &str| BoundValue::Error(format!("unable to bind parameter with type {go_type}"));
    match value {
        Json::Null => cannot("<nil>"),
        Json::Bool(b) => BoundValue::Boolean(b),
        Json::String(s) => BoundValue::String(s),
        Json::Array => cannot("[]interface {}"),
        Json::Object(entries) => object(entries),
        Json::Number(text) => number(text).map_or_else(BoundValue::Error, Number::bound),
    }
}

/// `{"kind": value}`: a value of a named kind.
fn object(entries: Raw) -> BoundValue {
    let error = |why: &str| BoundValue::Error(why.to_string());
    if entries.len() != 1 {
        return error("bound object parameter value must have exactly one entry");
    }
    let Some((kind, value)) = entries.into_iter().next() else {
        return error("bound object parameter value must have exactly one entry");
    };
    let value = match Json::of(&value) {
        Json::Number(text) => match number(text) {
            Ok(n) => Ok(n),
            Err(why) => return BoundValue::Error(why),
        },
        other => Err(other),
    };
    match (kind.as_str(), value) {
        ("ident" | "identifier", Err(Json::String(s))) => BoundValue::Identifier(s),
        ("ident" | "identifier", _) => error("identifier must be a string value"),
        ("regex", Err(Json::String(s))) => BoundValue::Regex(s),
        ("regex", _) => error("regex literal must be a string value"),
        ("string", Err(Json::String(s))) => BoundValue::String(s),
        ("string", _) => error("string literal must be a string value"),
        ("float" | "number", Ok(Number::Float(v))) => BoundValue::Number(v),
        ("float" | "number", Ok(Number::Integer(v))) => BoundValue::Number(v as f64),
        ("float" | "number", _) => error("number literal must be a float value"),
        ("int" | "integer", Ok(Number::Integer(v))) => BoundValue::Integer(v),
        ("int" | "integer", _) => error("integer literal must be an integer value"),
        ("duration", Err(Json::String(s))) => BoundValue::Duration(s),
        ("duration", Ok(Number::Integer(ns))) => {
            BoundValue::Duration(sluice_influxql::Duration(ns).to_string())
        }
        ("duration", _) => error("duration literal must be a string or integer value"),
        (other, _) => BoundValue::Error(format!("unknown bind object type: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use BoundValue::*;

    fn one(json: &str) -> BoundValue {
        decode(&format!("{{\"v\": {json}}}"))
            .unwrap()
            .remove("v")
            .unwrap()
    }

    #[test]
    fn values_bind_as_influxdb_binds_them() {
        assert_eq!(one("\"a\""), String("a".into()));
        assert_eq!(one("2"), Integer(2));
        assert_eq!(one("-3"), Integer(-3));
        assert_eq!(one("2.5"), Number(2.5));
        assert_eq!(one("1.5e3"), Number(1500.0));
        assert_eq!(one("true"), Boolean(true));
        assert_eq!(one(r#"{"identifier": "cpu"}"#), Identifier("cpu".into()));
        assert_eq!(one(r#"{"ident": "cpu"}"#), Identifier("cpu".into()));
        assert_eq!(one(r#"{"regex": "^a"}"#), Regex("^a".into()));
        assert_eq!(one(r#"{"string": "a"}"#), String("a".into()));
        assert_eq!(one(r#"{"float": 2}"#), Number(2.0));
        assert_eq!(one(r#"{"number": 2.5}"#), Number(2.5));
        assert_eq!(one(r#"{"integer": 2}"#), Integer(2));
        assert_eq!(one(r#"{"duration": "5m"}"#), Duration("5m".into()));
        assert_eq!(one(r#"{"duration": 5000000000}"#), Duration("5s".into()));
        assert_eq!(
            one(r#"{"duration": 1500000000}"#),
            Duration("1500ms".into())
        );
    }

    /// InfluxDB 1.8's words for each (checked against a running influxd 1.8.10).
    #[test]
    fn values_that_cannot_bind_fail_only_where_used() {
        let e = |s: &str| Error(s.into());
        assert_eq!(one("null"), e("unable to bind parameter with type <nil>"));
        assert_eq!(
            one("[1]"),
            e("unable to bind parameter with type []interface {}")
        );
        assert_eq!(
            one(r#"{"integer": 2, "float": 3}"#),
            e("bound object parameter value must have exactly one entry")
        );
        assert_eq!(
            one(r#"{"integer": "2"}"#),
            e("integer literal must be an integer value")
        );
        assert_eq!(
            one(r#"{"integer": 2.5}"#),
            e("integer literal must be an integer value")
        );
        assert_eq!(
            one(r#"{"float": "x"}"#),
            e("number literal must be a float value")
        );
        assert_eq!(
            one(r#"{"integer": 1e3}"#),
            e("strconv.ParseInt: parsing \"1e3\": invalid syntax")
        );
        assert_eq!(
            one(r#"{"duration": true}"#),
            e("duration literal must be a string or integer value")
        );
        assert_eq!(one(r#"{"foo": 1}"#), e("unknown bind object type: foo"));
    }

    #[test]
    fn a_request_with_unreadable_params_is_refused() {
        let number = |s: &str| decode(&format!("{{\"v\": {s}}}")).unwrap_err().to_string();
        assert_eq!(
            number("1e3"),
            "error parsing json value: strconv.ParseInt: parsing \"1e3\": invalid syntax"
        );
        assert_eq!(
            number("99999999999999999999"),
            "error parsing json value: strconv.ParseInt: parsing \"99999999999999999999\": \
             value out of range"
        );
        assert_eq!(
            number("1.0e400"),
            "error parsing json value: strconv.ParseFloat: parsing \"1.0e400\": value out of range"
        );
        for bad in ["notjson", "[1]", "{\"v\":", "\"v\""] {
            let e = decode(bad).unwrap_err().to_string();
            assert!(
                e.starts_with("error parsing query parameters: "),
                "{bad}: {e}"
            );
        }
        // Like Go's decoder, what follows the object is not read.
        assert_eq!(decode("{\"v\": 1} x").unwrap().len(), 1);
    }

    #[test]
    fn statements_bind_their_parameters() {
        let stmts = parse("SELECT v FROM m WHERE h = $h", Some(r#"{"h": "a"}"#))
            .unwrap()
            .unwrap();
        let Statement::Select(s) = &stmts[0] else {
            panic!("a SELECT")
        };
        assert_eq!(s.to_string(), "SELECT v FROM m WHERE h = 'a'");
        let unbound = parse("SELECT v FROM m WHERE h = $h", Some("")).unwrap();
        assert_eq!(unbound.unwrap_err().to_string(), "missing parameter: h");
    }
}
