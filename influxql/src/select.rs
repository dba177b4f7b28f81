//! `SELECT`: fields, sources, WHERE, GROUP BY, fill, ORDER BY, limits and tz, in InfluxDB's
//! fixed clause order. GROUP BY entries are also checked the way InfluxDB checks them when it
//! compiles the statement (and reported only if the whole query parses, as there), so the AST
//! only holds dimensions InfluxDB would run.

use crate::ast::{
    Dimension, Duration, Expr, Field, Fill, Literal, SelectStatement, Source, TimeOffset,
};
use crate::error::{ErrorKind, ParseError};
use crate::parser::{Parser, Result};
use crate::token::{Kw, Tok};

fn invalid(message: &str) -> ParseError {
    ParseError::bare(ErrorKind::Invalid, message)
}

impl Parser {
    /// The rest of a SELECT statement whose keyword has been read.
    pub(crate) fn parse_select(&mut self) -> Result<SelectStatement> {
        let fields = self.parse_fields()?;
        self.parse_into()?;
        self.expect_kw(Kw::From)?;
        let sources = self.parse_sources()?;
        let condition = self.parse_condition()?;
        let group_by = self.parse_dimensions()?;
        let fill = self.parse_fill()?;
        let order = self.parse_order_by()?;
        let limit = self.parse_optional_int(Kw::Limit)?;
        let offset = self.parse_optional_int(Kw::Offset)?;
        let slimit = self.parse_optional_int(Kw::Slimit)?;
        let soffset = self.parse_optional_int(Kw::Soffset)?;
        let timezone = self.parse_tz()?;
        Ok(SelectStatement {
            fields,
            sources,
            condition,
            group_by,
            fill,
            order,
            limit,
            offset,
            slimit,
            soffset,
            timezone,
        })
    }

    /// `INTO [[db.]rp.]m` or `INTO ...:MEASUREMENT`. Parsed so that a syntax error later in
    /// the query is still reported first, as InfluxDB would, then refused.
    fn parse_into(&mut self) -> Result<()> {
        let into = self.peek();
        if !into.tok.is_kw(Kw::Into) {
            return Ok(());
        }
        self.advance(&into);
        let (idents, _) = self.parse_segmented_idents()?;
        if idents.len() < 3 && self.chars.get(self.pos) == Some(&':') {
            self.expect(Tok::Colon, ":")?;
            self.expect_kw(Kw::Measurement)?;
        }
        let msg = "SELECT ... INTO is not supported";
        self.defer(ParseError::at(
            ErrorKind::Unsupported,
            msg,
            self.pos_at(into.start),
        ));
        Ok(())
    }

    fn parse_fields(&mut self) -> Result<Vec<Field>> {
        let mut fields = vec![self.parse_field()?];
        while self.peek().tok == Tok::Comma {
            self.next();
            fields.push(self.parse_field()?);
        }
        Ok(fields)
    }

    fn parse_field(&mut self) -> Result<Field> {
        let expr = match self.try_regex()? {
            Some(re) => Expr::Literal(Literal::Regex(re)),
            None => {
                let first = self.peek();
                let expr = self.parse_expr()?;
                if let Some(op) = first_condition_op(&expr) {
                    let pos = self.token_pos(&first);
                    let msg = format!(
                        "invalid operator {op} in SELECT clause at line {}, char {}; \
                         operator is intended for WHERE clause",
                        pos.line, pos.column
                    );
                    return Err(ParseError::custom(ErrorKind::Invalid, msg, pos));
                }
                expr
            }
        };
        let alias = if self.eat_kw(Kw::As) {
            Some(self.parse_ident()?)
        } else {
            None
        };
        Ok(Field { expr, alias })
    }

    fn parse_sources(&mut self) -> Result<Vec<Source>> {
        let mut sources = vec![self.parse_source()?];
        while self.peek().tok == Tok::Comma {
            self.next();
            sources.push(self.parse_source()?);
        }
        Ok(sources)
    }

    /// A measurement, regex, or parenthesised subquery.
    fn parse_source(&mut self) -> Result<Source> {
        if let Some(re) = self.try_regex()? {
            return Ok(Source::Measurement(crate::ast::Measurement {
                database: None,
                retention_policy: None,
                name: crate::ast::MeasurementName::Regex(re),
            }));
        }
        let open = self.peek();
        if open.tok != Tok::LParen {
            return self.parse_measurement().map(Source::Measurement);
        }
        self.advance(&open);
        self.expect_kw(Kw::Select)?;
        self.enter(open.start)?;
        let inner = self.parse_select();
        self.leave();
        let inner = inner?;
        self.expect(Tok::RParen, ")")?;
        Ok(Source::Subquery(Box::new(inner)))
    }

    /// `GROUP BY dimension[, dimension]*`. `GROUP BY fill(...)` with no dimension is taken
    /// as a bare fill, because Grafana sends it when a panel groups by nothing but fill.
    pub(crate) fn parse_dimensions(&mut self) -> Result<Vec<Dimension>> {
        if !self.eat_kw(Kw::Group) {
            return Ok(Vec::new());
        }
        self.expect_kw(Kw::By)?;
        if self.at_call("fill") {
            return Ok(Vec::new());
        }
        let mut dims = vec![self.parse_dimension()?];
        while self.peek().tok == Tok::Comma {
            self.next();
            dims.push(self.parse_dimension()?);
        }
        let times = dims.iter().filter(|d| matches!(d, Dimension::Time { .. }));
        if times.count() > 1 {
            self.defer(compile_error("multiple time dimensions not allowed"));
        }
        Ok(dims)
    }

    /// Whether the next tokens are `name(`, the name matched case-insensitively.
    fn at_call(&mut self, name: &str) -> bool {
        let t = self.peek();
        match &t.tok {
            Tok::Ident(n) if n.eq_ignore_ascii_case(name) => {
                let saved = self.pos;
                self.pos = t.end;
                let paren = self.raw().tok == Tok::LParen;
                self.pos = saved;
                paren
            }
            _ => false,
        }
    }

    /// One GROUP BY entry. InfluxDB parses any expression here and rejects the wrong ones
    /// only when it compiles the statement, so those errors are deferred (the placeholder
    /// returned with them never leaves the parser).
    fn parse_dimension(&mut self) -> Result<Dimension> {
        if let Some(re) = self.try_regex()? {
            return Ok(Dimension::Regex(re));
        }
        let dimension = match self.parse_expr()? {
            Expr::VarRef { name, .. } if name.eq_ignore_ascii_case("time") => Err(compile_error(
                "time() is a function and expects at least one argument",
            )),
            Expr::VarRef { name, .. } => Ok(Dimension::Tag(name)),
            Expr::Wildcard(_) => Ok(Dimension::Wildcard),
            Expr::Call { name, args } if name == "time" => time_dimension(args),
            Expr::Call { .. } => Err(compile_error("only time() calls allowed in dimensions")),
            _ => Err(compile_error("only time and tag dimensions allowed")),
        };
        Ok(dimension.unwrap_or_else(|e| {
            self.defer(e);
            Dimension::Wildcard
        }))
    }

    /// `fill(null|none|previous|linear|number)`, checked as InfluxDB checks it.
    fn parse_fill(&mut self) -> Result<Option<Fill>> {
        if !self.at_word("fill") {
            return Ok(None);
        }
        let Expr::Call { args, .. } = self.parse_expr()? else {
            return Err(invalid("fill must be a function call"));
        };
        let [arg] = args.as_slice() else {
            return Err(invalid(
                "fill requires an argument, e.g.: 0, null, none, previous, linear",
            ));
        };
        Ok(Some(match arg.to_string().as_str() {
            "null" => Fill::Null,
            "none" => Fill::None,
            "previous" => Fill::Previous,
            "linear" => Fill::Linear,
            _ => match arg {
                Expr::Literal(Literal::Integer(v)) => Fill::Integer(*v),
                Expr::Literal(Literal::Float(v)) => Fill::Float(*v),
                _ => return Err(invalid("expected number argument in fill()")),
            },
        }))
    }

    /// `tz('Area/City')`. The name is not looked up: sluice has no time zone database here.
    fn parse_tz(&mut self) -> Result<Option<String>> {
        if !self.at_word("tz") {
            return Ok(None);
        }
        let Expr::Call { args, .. } = self.parse_expr()? else {
            return Err(invalid("tz must be a function call"));
        };
        match args.as_slice() {
            [Expr::Literal(Literal::String(name))] if plausible_zone(name) => {
                Ok(Some(name.clone()))
            }
            [Expr::Literal(Literal::String(name))] => {
                Err(invalid(&format!("unable to find time zone {name}")))
            }
            [_] => Err(invalid("expected string argument in tz()")),
            _ => Err(invalid("tz requires exactly one argument")),
        }
    }

    /// Whether the next token is the identifier `word`, in any case.
    fn at_word(&mut self, word: &str) -> bool {
        matches!(&self.peek().tok, Tok::Ident(n) if n.eq_ignore_ascii_case(word))
    }
}

/// Whether `name` could be a zone InfluxDB loads: empty (UTC), `Local`, or an IANA name,
/// which only uses letters, digits, `/`, `_`, `+` and `-`. Whether the zone exists is left
/// to whoever evaluates the query; this only refuses what can never be one.
fn plausible_zone(name: &str) -> bool {
    !name.starts_with('/')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '+' | '-'))
}

fn compile_error(message: &str) -> ParseError {
    ParseError::bare(ErrorKind::Compile, message)
}

fn time_dimension(args: Vec<Expr>) -> Result<Dimension> {
    let mut args = args.into_iter();
    let (interval, offset) = match (args.next(), args.next(), args.next()) {
        (Some(interval), offset, None) => (interval, offset),
        _ => return Err(compile_error("time dimension expected 1 or 2 arguments")),
    };
    let Expr::Literal(Literal::Duration(interval)) = interval else {
        return Err(compile_error("time dimension must have duration argument"));
    };
    let offset = match offset {
        None => None,
        Some(Expr::Literal(Literal::Duration(d))) => Some(TimeOffset::Duration(d)),
        Some(Expr::Call { name, args }) if name == "now" => {
            if !args.is_empty() {
                return Err(compile_error(
                    "time dimension offset now() function requires no arguments",
                ));
            }
            Some(TimeOffset::Now)
        }
        Some(Expr::Call { .. }) => {
            return Err(compile_error(
                "time dimension offset function must be now()",
            ))
        }
        Some(_) => {
            return Err(compile_error(
                "time dimension offset must be duration or now()",
            ))
        }
    };
    Ok(Dimension::Time {
        interval: Duration(interval.0),
        offset,
    })
}

/// The first comparison or logical operator in `expr`, in InfluxDB's walk order (outermost
/// first, then left to right). Recursion is bounded by the expression height limit.
fn first_condition_op(expr: &Expr) -> Option<crate::ast::BinaryOp> {
    match expr {
        Expr::Binary { lhs, op, rhs } => {
            if op.is_condition() {
                return Some(*op);
            }
            first_condition_op(lhs).or_else(|| first_condition_op(rhs))
        }
        Expr::Call { args, .. } => args.iter().find_map(first_condition_op),
        Expr::Paren(inner) => first_condition_op(inner),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::{Measurement, MeasurementName, SortOrder, Statement};

    fn select(q: &str) -> SelectStatement {
        match crate::parse(q) {
            Ok(mut stmts) if stmts.len() == 1 => match stmts.remove(0) {
                Statement::Select(s) => *s,
                other => panic!("{q}: not a select: {other:?}"),
            },
            other => panic!("{q}: {other:?}"),
        }
    }

    fn err(q: &str) -> String {
        match crate::parse(q) {
            Ok(s) => panic!("{q} parsed as {s:?}"),
            Err(e) => e.to_string(),
        }
    }

    const S: i64 = 1_000_000_000;

    #[test]
    fn clauses_in_order() {
        let s = select(
            "SELECT mean(v) AS m FROM cpu WHERE host = 'a' GROUP BY time(1m, -30s), host \
             fill(0) ORDER BY time DESC LIMIT 5 OFFSET 1 SLIMIT 2 SOFFSET 3 tz('Europe/Paris')",
        );
        assert_eq!(s.fields.len(), 1);
        assert_eq!(s.fields[0].alias.as_deref(), Some("m"));
        assert_eq!(
            s.sources,
            vec![Source::Measurement(Measurement {
                database: None,
                retention_policy: None,
                name: MeasurementName::Name("cpu".into())
            })]
        );
        assert!(s.condition.is_some());
        assert_eq!(
            s.group_by,
            vec![
                Dimension::Time {
                    interval: Duration(60 * S),
                    offset: Some(TimeOffset::Duration(Duration(-30 * S)))
                },
                Dimension::Tag("host".into())
            ]
        );
        assert_eq!(s.fill, Some(Fill::Integer(0)));
        assert_eq!(s.order, Some(SortOrder::Descending));
        assert_eq!(
            (s.limit, s.offset, s.slimit, s.soffset),
            (Some(5), Some(1), Some(2), Some(3))
        );
        assert_eq!(s.timezone.as_deref(), Some("Europe/Paris"));
    }

    #[test]
    fn fill_options() {
        let fill = |q: &str| select(&format!("SELECT mean(v) FROM m GROUP BY time(1m) {q}")).fill;
        assert_eq!(fill("fill(null)"), Some(Fill::Null));
        assert_eq!(fill("FILL(none)"), Some(Fill::None));
        assert_eq!(fill("fill(previous)"), Some(Fill::Previous));
        assert_eq!(fill("fill(linear)"), Some(Fill::Linear));
        assert_eq!(fill("fill(-1)"), Some(Fill::Integer(-1)));
        assert_eq!(fill("fill(2.5)"), Some(Fill::Float(2.5)));
        assert_eq!(fill(""), None);
        assert_eq!(select("SELECT v FROM m fill(none)").fill, Some(Fill::None));
        let bare = select("SELECT mean(v) FROM m GROUP BY fill(null)");
        assert_eq!((bare.group_by, bare.fill), (vec![], Some(Fill::Null)));
        assert_eq!(
            err("SELECT v FROM m fill('x')"),
            "expected number argument in fill()"
        );
        assert_eq!(
            err("SELECT v FROM m fill()"),
            "fill requires an argument, e.g.: 0, null, none, previous, linear"
        );
        assert_eq!(
            err("SELECT mean(value) FROM cpu FILL + value"),
            "fill must be a function call"
        );
    }

    #[test]
    fn dimensions() {
        let dims = |q: &str| select(&format!("SELECT v FROM m GROUP BY {q}")).group_by;
        assert_eq!(dims("*"), vec![Dimension::Wildcard]);
        assert_eq!(
            dims(r#""host"::tag, /^d/"#),
            vec![
                Dimension::Tag("host".into()),
                Dimension::Regex(crate::ast::Regex("^d".into()))
            ]
        );
        assert_eq!(
            dims("time(1h, now())"),
            vec![Dimension::Time {
                interval: Duration(3600 * S),
                offset: Some(TimeOffset::Now)
            }]
        );
        for (q, e) in [
            ("now()", "only time() calls allowed in dimensions"),
            ("time()", "time dimension expected 1 or 2 arguments"),
            (
                "time(5m, 30s, 1ms)",
                "time dimension expected 1 or 2 arguments",
            ),
            (
                "time('unexpected')",
                "time dimension must have duration argument",
            ),
            ("time(5m), time(1m)", "multiple time dimensions not allowed"),
            (
                "time(5m, unexpected())",
                "time dimension offset function must be now()",
            ),
            (
                "time(5m, now(1m))",
                "time dimension offset now() function requires no arguments",
            ),
            (
                "time(5m, 'unexpected')",
                "time dimension offset must be duration or now()",
            ),
            ("'unexpected'", "only time and tag dimensions allowed"),
            (
                "time",
                "time() is a function and expects at least one argument",
            ),
        ] {
            assert_eq!(
                err(&format!("SELECT value FROM cpu GROUP BY {q}")),
                e,
                "{q}"
            );
        }
    }

    #[test]
    fn select_list_rules() {
        assert_eq!(err("SELECT value > 2 FROM cpu"), "invalid operator > in SELECT clause at line 1, char 8; operator is intended for WHERE clause");
        assert_eq!(err("SELECT a, s =~ /foo/ FROM cpu"), "invalid operator =~ in SELECT clause at line 1, char 11; operator is intended for WHERE clause");
        assert_eq!(
            err("SELECT v INTO x FROM m"),
            "SELECT ... INTO is not supported at line 1, char 10"
        );
        assert_eq!(
            err("SELECT v FROM m tz(1)"),
            "expected string argument in tz()"
        );
        assert_eq!(err("SELECT v FROM m tz"), "tz must be a function call");
        assert_eq!(
            err("SELECT v FROM m tz('a', 'b')"),
            "tz requires exactly one argument"
        );
        let s = select("SELECT /u.*/, * FROM /c/, (SELECT max(v) FROM m GROUP BY time(1m))");
        assert_eq!(s.fields.len(), 2);
        assert!(matches!(s.sources[1], Source::Subquery(_)));
    }
}
