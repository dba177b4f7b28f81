//! InfluxQL for sluice: the statements Grafana's InfluxDB data source and InfluxDB 1.x
//! clients send, parsed into a plain AST.
//!
//! Acceptance and error messages follow InfluxDB 1.8 (its `influxql` parser and the checks
//! it makes when compiling a query), because clients are written against InfluxDB's
//! behaviour: what InfluxDB accepts parses, what it refuses fails with InfluxDB's message and
//! position (`found FROM, expected identifier, string, number, bool at line 1, char 8`). The
//! caller adds the `error parsing query: ` prefix InfluxDB's HTTP API puts in front.
//!
//! Statements InfluxDB knows but sluice does not implement (user management, continuous
//! queries, `DROP ...`) come back as [`Statement::Unsupported`] rather than as errors, so the
//! rest of a multi-statement query still runs. `SELECT ... INTO` is refused outright.
//!
//! [`ErrorKind`] tells the caller how InfluxDB would have answered: `Compile` errors (an
//! invalid GROUP BY) are ones InfluxDB reports as the statement's result error rather than as
//! `error parsing query`, and a genuine parse error anywhere in the query takes precedence
//! over them, as it does in InfluxDB.
//!
//! ```
//! use sluice_influxql::{parse, Statement};
//!
//! let stmts = parse(r#"SELECT mean("value") FROM "cpu" WHERE time > now() - 1h GROUP BY time(10s)"#)
//!     .expect("valid InfluxQL");
//! let Statement::Select(select) = &stmts[0] else { unreachable!() };
//! assert_eq!(select.fields[0].expr.to_string(), "mean(value)");
//! assert_eq!(select.column_names(), ["time", "mean"]);
//!
//! let err = parse("SELECT FROM cpu").unwrap_err();
//! assert_eq!(err.to_string(), "found FROM, expected identifier, string, number, bool at line 1, char 8");
//! ```

pub mod ast;
mod display;
mod duration;
mod error;
mod expr;
mod lexer;
mod naming;
mod params;
mod parser;
mod select;
mod show;
mod statement;
mod token;

pub use ast::*;
pub use display::{ident_needs_quotes, quote_ident, quote_string};
pub use duration::Duration;
pub use error::{ErrorKind, ParseError, Pos};
pub use expr::MAX_EXPR_HEIGHT;
pub use params::{BoundValue, Params};
pub use parser::MAX_NESTING;

/// Parses a query: statements separated by `;`. Empty input (or only separators and
/// whitespace) gives no statements; InfluxDB's HTTP API rejects an empty `q` before parsing,
/// and so should the caller.
pub fn parse(query: &str) -> Result<Vec<Statement>, ParseError> {
    parser::Parser::new(query).parse_query()
}

/// Parses a query whose `$name` parameters take their values from `params`, as InfluxDB's
/// `params` request parameter gives them.
pub fn parse_with_params(query: &str, params: &Params) -> Result<Vec<Statement>, ParseError> {
    parser::Parser::with_params(query, params.clone()).parse_query()
}

/// Parses a single expression, such as a condition, and nothing after it.
pub fn parse_expr(expr: &str) -> Result<Expr, ParseError> {
    let mut p = parser::Parser::new(expr);
    let e = p.parse_expr()?;
    let t = p.peek();
    if t.tok != token::Tok::Eof {
        return Err(p.unexpected(&t, &["EOF"]));
    }
    match p.take_deferred() {
        Some(err) => Err(err),
        None => Ok(e),
    }
}
