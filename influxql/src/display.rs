//! Rendering the AST back to InfluxQL the way InfluxDB prints it: identifiers quoted only
//! when they must be, strings single-quoted with escapes, durations in their largest exact
//! unit. What is printed parses back to the same AST.

use std::fmt::{self, Display, Formatter, Write};

use crate::ast::*;
use crate::lexer::{is_ident_char, is_ident_first};
use crate::token::Kw;

/// Whether `ident` needs double quotes to be read back as the same identifier.
pub fn ident_needs_quotes(ident: &str) -> bool {
    if Kw::lookup(ident).is_some() {
        return true;
    }
    let mut chars = ident.chars();
    match chars.next() {
        None => false,
        Some(first) => !is_ident_first(first) || !chars.all(is_ident_char),
    }
}

/// An identifier as InfluxQL text: bare when possible, otherwise double-quoted with `\"`,
/// `\\` and `\n` escapes.
pub fn quote_ident(ident: &str) -> String {
    if ident.is_empty() || ident_needs_quotes(ident) {
        format!("\"{}\"", escape(ident, '"'))
    } else {
        ident.to_string()
    }
}

/// A string literal as InfluxQL text, single-quoted with `\'`, `\\` and `\n` escapes.
pub fn quote_string(s: &str) -> String {
    format!("'{}'", escape(s, '\''))
}

fn escape(s: &str, quote: char) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\\' => out.push_str("\\\\"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

impl Display for Regex {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "/{}/", self.0.replace('/', "\\/"))
    }
}

impl Display for BinaryOp {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Mod => "%",
            BinaryOp::BitAnd => "&",
            BinaryOp::BitOr => "|",
            BinaryOp::BitXor => "^",
            BinaryOp::And => "AND",
            BinaryOp::Or => "OR",
            BinaryOp::Eq => "=",
            BinaryOp::NotEq => "!=",
            BinaryOp::EqRegex => "=~",
            BinaryOp::NotEqRegex => "!~",
            BinaryOp::Lt => "<",
            BinaryOp::LtEq => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::GtEq => ">=",
        })
    }
}

impl Display for DataType {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DataType::Float => "float",
            DataType::Integer => "integer",
            DataType::Unsigned => "unsigned",
            DataType::String => "string",
            DataType::Boolean => "boolean",
            DataType::Field => "field",
            DataType::Tag => "tag",
        })
    }
}

impl Display for WildcardType {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WildcardType::Field => "field",
            WildcardType::Tag => "tag",
        })
    }
}

impl Display for Literal {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Literal::Integer(v) => write!(f, "{v}"),
            Literal::Unsigned(v) => write!(f, "{v}"),
            Literal::Float(v) => write_float(f, *v),
            Literal::String(s) => f.write_str(&quote_string(s)),
            Literal::Boolean(b) => write!(f, "{b}"),
            Literal::Duration(d) => write!(f, "{d}"),
            Literal::Regex(r) => write!(f, "{r}"),
        }
    }
}

/// A float always shows a decimal point, so that it reads back as a float, not an integer.
fn write_float(f: &mut Formatter<'_>, v: f64) -> fmt::Result {
    let s = v.to_string();
    if s.contains('.') || !v.is_finite() {
        f.write_str(&s)
    } else {
        write!(f, "{s}.0")
    }
}

impl Display for Expr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Expr::VarRef { name, data_type } => {
                f.write_str(&quote_ident(name))?;
                if let Some(t) = data_type {
                    write!(f, "::{t}")?;
                }
                Ok(())
            }
            Expr::Literal(l) => write!(f, "{l}"),
            Expr::Wildcard(None) => f.write_char('*'),
            Expr::Wildcard(Some(t)) => write!(f, "*::{t}"),
            Expr::Distinct(name) => write!(f, "DISTINCT {}", quote_ident(name)),
            Expr::Call { name, args } => {
                // `distinct` is a keyword but is read back as a call when `(` follows it.
                if name == "distinct" {
                    f.write_str(name)?;
                } else {
                    f.write_str(&quote_ident(name))?;
                }
                f.write_char('(')?;
                for (i, arg) in args.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{arg}")?;
                }
                f.write_char(')')
            }
            Expr::Binary { lhs, op, rhs } => match signed(lhs, *op, rhs) {
                Some(sign) => write!(f, "{sign}{rhs}"),
                None => write!(f, "{lhs} {op} {rhs}"),
            },
            Expr::Paren(e) => write!(f, "({e})"),
        }
    }
}

/// The sign a unary `-x` or `+x` was read from: the parser makes it `-1 * x` (as InfluxDB
/// does), which printed that way would bind to what stands before it (`a / -b` would come
/// back as `(a / -1) * b`). Printed as the sign it parses back to the same tree. Only operands
/// the sign can be read before qualify: a literal after a sign folds into it, and `DISTINCT`,
/// wildcards and regexes cannot follow one.
fn signed(lhs: &Expr, op: BinaryOp, rhs: &Expr) -> Option<char> {
    let sign = match (lhs, op) {
        (Expr::Literal(Literal::Integer(-1)), BinaryOp::Mul) => '-',
        (Expr::Literal(Literal::Integer(1)), BinaryOp::Mul) => '+',
        _ => return None,
    };
    match rhs {
        Expr::VarRef { .. } | Expr::Paren(_) => Some(sign),
        Expr::Call { name, .. } if name != "distinct" => Some(sign),
        _ => None,
    }
}

impl Display for Field {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.expr)?;
        if let Some(alias) = &self.alias {
            write!(f, " AS {}", quote_ident(alias))?;
        }
        Ok(())
    }
}

impl Display for Measurement {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if let Some(db) = &self.database {
            write!(f, "{}.", quote_ident(db))?;
        }
        if let Some(rp) = &self.retention_policy {
            f.write_str(&quote_ident(rp))?;
        }
        if self.database.is_some() || self.retention_policy.is_some() {
            f.write_char('.')?;
        }
        match &self.name {
            MeasurementName::Name(n) => f.write_str(&quote_ident(n)),
            MeasurementName::Regex(r) => write!(f, "{r}"),
        }
    }
}

impl Display for TimeOffset {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            TimeOffset::Duration(d) => write!(f, "{d}"),
            TimeOffset::Now => f.write_str("now()"),
        }
    }
}

impl Display for Dimension {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Dimension::Time { interval, offset } => match offset {
                Some(o) => write!(f, "time({interval}, {o})"),
                None => write!(f, "time({interval})"),
            },
            Dimension::Tag(t) => f.write_str(&quote_ident(t)),
            Dimension::Wildcard => f.write_char('*'),
            Dimension::Regex(r) => write!(f, "{r}"),
        }
    }
}

impl Display for Fill {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str("fill(")?;
        match self {
            Fill::Null => f.write_str("null")?,
            Fill::None => f.write_str("none")?,
            Fill::Previous => f.write_str("previous")?,
            Fill::Linear => f.write_str("linear")?,
            Fill::Integer(v) => write!(f, "{v}")?,
            Fill::Float(v) => write_float(f, *v)?,
        }
        f.write_char(')')
    }
}

impl Display for Source {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Source::Measurement(m) => write!(f, "{m}"),
            Source::Subquery(s) => write!(f, "({s})"),
        }
    }
}

/// A `SELECT` as text that parses back to it (a gathering pod sends a subquery's statement to
/// every pod this way).
impl Display for SelectStatement {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let list = |items: Vec<String>| items.join(", ");
        write!(
            f,
            "SELECT {} FROM {}",
            list(self.fields.iter().map(|x| x.to_string()).collect()),
            list(self.sources.iter().map(|x| x.to_string()).collect())
        )?;
        if let Some(c) = &self.condition {
            write!(f, " WHERE {c}")?;
        }
        if !self.group_by.is_empty() {
            let dims = list(self.group_by.iter().map(|x| x.to_string()).collect());
            write!(f, " GROUP BY {dims}")?;
        }
        if let Some(fill) = &self.fill {
            write!(f, " {fill}")?;
        }
        match self.order {
            Some(SortOrder::Descending) => f.write_str(" ORDER BY time DESC")?,
            Some(SortOrder::Ascending) => f.write_str(" ORDER BY time ASC")?,
            None => {}
        }
        let numbers = [
            ("LIMIT", self.limit),
            ("OFFSET", self.offset),
            ("SLIMIT", self.slimit),
            ("SOFFSET", self.soffset),
        ];
        for (kw, n) in numbers {
            if let Some(n) = n {
                write!(f, " {kw} {n}")?;
            }
        }
        if let Some(tz) = &self.timezone {
            write!(f, " tz({})", quote_string(tz))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_statements_print_back_to_themselves() {
        for q in [
            "SELECT mean(\"value\") AS m, max(n) FROM \"db\".\"rp\".cpu, /^m/ WHERE host = 'a' AND time > now() - 1h GROUP BY time(1m, 15s), \"host\", * fill(previous) ORDER BY time DESC LIMIT 3 OFFSET 1 SLIMIT 2 SOFFSET 1 tz('Europe/Paris')",
            "SELECT sum(\"max\") FROM (SELECT max(v) FROM m WHERE (time > 5s) AND (v < 3) GROUP BY host, time(10s) fill(none)) WHERE \"max\" > 1 GROUP BY time(1m)",
            "SELECT v::float, host::tag FROM m",
            // A sign after an operator: `-b` is read as `-1 * b`, which must not print as
            // `a / -1 * b` (read back as `(a / -1) * b`).
            "SELECT a / -b, a % +mean(c), -(a + b) * 2, x - -y, -1 * z, a / -1 * b FROM m",
        ] {
            let first = crate::parse(q).unwrap();
            let Statement::Select(s) = &first[0] else { panic!("{q}") };
            let again = crate::parse(&s.to_string()).unwrap();
            assert_eq!(first, again, "{q} -> {s}");
        }
    }

    #[test]
    fn quoting() {
        assert_eq!(quote_ident("cpu"), "cpu");
        assert_eq!(quote_ident("_x1"), "_x1");
        assert_eq!(quote_ident("5m_avg"), "\"5m_avg\"");
        assert_eq!(quote_ident("select"), "\"select\"");
        assert_eq!(quote_ident("a b"), "\"a b\"");
        assert_eq!(quote_ident(""), "\"\"");
        assert_eq!(quote_ident("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(quote_string("it's\\"), r"'it\'s\\'");
        assert_eq!(quote_string("a\nb"), r"'a\nb'");
    }

    #[test]
    fn literals() {
        assert_eq!(Literal::Float(100.0).to_string(), "100.0");
        assert_eq!(Literal::Float(0.25).to_string(), "0.25");
        assert_eq!(Literal::Float(-1.5).to_string(), "-1.5");
        assert_eq!(Literal::Integer(-3).to_string(), "-3");
        assert_eq!(Literal::Boolean(true).to_string(), "true");
        assert_eq!(Literal::Regex(Regex("a/b".into())).to_string(), r"/a\/b/");
        assert_eq!(
            Literal::Duration(Duration(1_596_240_300_001_000_000)).to_string(),
            "1596240300001ms"
        );
    }

    #[test]
    fn measurements() {
        let m = |db: Option<&str>, rp: Option<&str>, name: MeasurementName| Measurement {
            database: db.map(String::from),
            retention_policy: rp.map(String::from),
            name,
        };
        let cpu = || MeasurementName::Name("cpu".into());
        assert_eq!(m(None, None, cpu()).to_string(), "cpu");
        assert_eq!(m(None, Some("rp"), cpu()).to_string(), "rp.cpu");
        assert_eq!(m(Some("db"), None, cpu()).to_string(), "db..cpu");
        assert_eq!(
            m(Some("db"), Some("r p"), cpu()).to_string(),
            "db.\"r p\".cpu"
        );
        let re = MeasurementName::Regex(Regex("^c".into()));
        assert_eq!(m(None, Some("rp"), re).to_string(), "rp./^c/");
    }
}
