//! Expressions: select fields, WHERE conditions, function arguments, GROUP BY entries.
//!
//! Binary operators are parsed by precedence climbing, left-associative within a level, which
//! builds the same trees as InfluxDB's parser. Unary minus folds into numeric literals and
//! becomes `-1 * x` elsewhere, also as InfluxDB does, so printed expressions and column names
//! match.

use crate::ast::{BinaryOp, DataType, Expr, Literal, WildcardType};
use crate::duration::parse_duration;
use crate::error::{ErrorKind, ParseError};
use crate::parser::{Parser, Result};
use crate::token::{Kw, Tok, Token};

/// The tallest expression tree accepted. Long operator chains (`a OR b OR c ...`) nest without
/// recursing in the parser, but dropping, cloning or printing the tree recurses once per
/// level; this keeps that well inside a 2 MiB thread stack.
pub const MAX_EXPR_HEIGHT: usize = 1_000;

fn binary_op(tok: &Tok) -> Option<BinaryOp> {
    Some(match tok {
        Tok::Add => BinaryOp::Add,
        Tok::Sub => BinaryOp::Sub,
        Tok::Mul => BinaryOp::Mul,
        Tok::Div => BinaryOp::Div,
        Tok::Mod => BinaryOp::Mod,
        Tok::BitAnd => BinaryOp::BitAnd,
        Tok::BitOr => BinaryOp::BitOr,
        Tok::BitXor => BinaryOp::BitXor,
        Tok::Keyword(Kw::And) => BinaryOp::And,
        Tok::Keyword(Kw::Or) => BinaryOp::Or,
        Tok::Eq => BinaryOp::Eq,
        Tok::Neq => BinaryOp::NotEq,
        Tok::EqRegex => BinaryOp::EqRegex,
        Tok::NeqRegex => BinaryOp::NotEqRegex,
        Tok::Lt => BinaryOp::Lt,
        Tok::Lte => BinaryOp::LtEq,
        Tok::Gt => BinaryOp::Gt,
        Tok::Gte => BinaryOp::GtEq,
        _ => return None,
    })
}

/// An expression with the height of its tree, tracked as it is built so that the height
/// check never has to walk a tree that is already too deep.
struct Sized {
    expr: Expr,
    height: usize,
}

fn leaf(expr: Expr) -> Sized {
    Sized { expr, height: 1 }
}

impl Parser {
    /// Parses one expression.
    pub(crate) fn parse_expr(&mut self) -> Result<Expr> {
        self.expr_sized().map(|s| s.expr)
    }

    fn expr_sized(&mut self) -> Result<Sized> {
        let lhs = self.unary()?;
        self.binary_rest(lhs, 0)
    }

    /// Folds operators of at least `min_prec` onto `lhs`.
    fn binary_rest(&mut self, mut lhs: Sized, min_prec: u8) -> Result<Sized> {
        loop {
            let t = self.peek();
            let Some(op) = binary_op(&t.tok) else {
                return Ok(lhs);
            };
            if op.precedence() < min_prec {
                return Ok(lhs);
            }
            self.advance(&t);
            let operand = if matches!(op, BinaryOp::EqRegex | BinaryOp::NotEqRegex) {
                leaf(Expr::Literal(Literal::Regex(self.expect_regex()?)))
            } else {
                self.unary()?
            };
            let rhs = self.binary_rest(operand, op.precedence() + 1)?;
            let height = 1 + lhs.height.max(rhs.height);
            if height > MAX_EXPR_HEIGHT {
                return Err(self.too_tall(t.start));
            }
            lhs = Sized {
                expr: Expr::Binary {
                    lhs: Box::new(lhs.expr),
                    op,
                    rhs: Box::new(rhs.expr),
                },
                height,
            };
        }
    }

    /// One operand. This function and the ones it recurses through stay small: in debug
    /// builds every local of a function takes stack space for the whole call, and these
    /// frames repeat once per nesting level.
    #[cold]
    #[inline(never)]
    fn too_tall(&self, at: usize) -> ParseError {
        let msg = format!("expression nested more than {MAX_EXPR_HEIGHT} levels deep");
        ParseError::at(ErrorKind::TooDeep, &msg, self.pos_at(at))
    }

    fn unary(&mut self) -> Result<Sized> {
        let t = self.next();
        match t.tok {
            Tok::LParen => self.paren(t.start),
            Tok::Ident(name) => self.ident_or_call(name),
            Tok::Keyword(Kw::Distinct) => self.distinct(t.start),
            Tok::Add | Tok::Sub => self.signed(t.tok == Tok::Sub, t.start),
            _ => self.literal(t).map(leaf),
        }
    }

    #[inline(never)]
    fn paren(&mut self, at: usize) -> Result<Sized> {
        self.enter(at)?;
        let inner = self.expr_sized();
        self.leave();
        let inner = inner?;
        self.expect(Tok::RParen, ")")?;
        Ok(Sized {
            height: inner.height + 1,
            expr: Expr::Paren(Box::new(inner.expr)),
        })
    }

    #[inline(never)]
    fn ident_or_call(&mut self, name: String) -> Result<Sized> {
        let after = self.raw();
        if after.tok == Tok::LParen {
            self.advance(&after);
            return self.call(&name, after.start);
        }
        self.var_ref(name).map(leaf)
    }

    #[inline(never)]
    fn distinct(&mut self, at: usize) -> Result<Sized> {
        let after = self.raw();
        match after.tok {
            Tok::LParen => {
                self.advance(&after);
                self.call("distinct", at)
            }
            Tok::Ws(_) => {
                self.advance(&after);
                let name = self.next();
                match name.tok {
                    Tok::Ident(n) => Ok(leaf(Expr::Distinct(n))),
                    _ => Err(self.unexpected(&name, &["identifier"])),
                }
            }
            _ => Err(self.unexpected(&after, &["(", "identifier"])),
        }
    }

    /// Operands that do not nest: literals, wildcards, and the tokens that cannot start an
    /// operand at all.
    #[inline(never)]
    fn literal(&mut self, t: Token) -> Result<Expr> {
        let lit = |l: Literal| Ok(Expr::Literal(l));
        match t.tok {
            Tok::Str(s) => lit(Literal::String(s)),
            Tok::Number(text) => match text.parse::<f64>() {
                Ok(v) if v.is_finite() => lit(Literal::Float(v)),
                _ => Err(self.invalid_at("unable to parse number", t.start)),
            },
            Tok::Integer(text) => match (text.parse::<i64>(), text.parse::<u64>()) {
                (Ok(v), _) => lit(Literal::Integer(v)),
                (_, Ok(v)) => lit(Literal::Unsigned(v)),
                _ => Err(self.invalid_at("unable to parse integer", t.start)),
            },
            Tok::Keyword(Kw::True) => lit(Literal::Boolean(true)),
            Tok::Keyword(Kw::False) => lit(Literal::Boolean(false)),
            Tok::Duration(text) => match parse_duration(&text) {
                Ok(d) => lit(Literal::Duration(d)),
                Err(e) => Err(ParseError::bare(ErrorKind::Invalid, e.to_string())),
            },
            Tok::Mul => self.wildcard(),
            // Only a parameter bound to a regex is a regex token here.
            Tok::Regex(source) => lit(Literal::Regex(crate::ast::Regex(source))),
            Tok::BoundParam(param) => {
                let name = param.trim_start_matches('$');
                let msg = if name.is_empty() {
                    "empty bound parameter".to_string()
                } else {
                    format!("missing parameter: {name}")
                };
                Err(ParseError::bare(ErrorKind::Invalid, msg))
            }
            _ => Err(self.unexpected(&t, &["identifier", "string", "number", "bool"])),
        }
    }

    /// `*`, `*::field` or `*::tag`, the `*` having been read.
    fn wildcard(&mut self) -> Result<Expr> {
        let after = self.raw();
        if after.tok != Tok::DoubleColon {
            return Ok(Expr::Wildcard(None));
        }
        self.advance(&after);
        let kind = self.raw();
        let wildcard = match kind.tok {
            Tok::Keyword(Kw::Field) => WildcardType::Field,
            Tok::Keyword(Kw::Tag) => WildcardType::Tag,
            _ => return Err(self.unexpected(&kind, &["field", "tag"])),
        };
        self.advance(&kind);
        Ok(Expr::Wildcard(Some(wildcard)))
    }

    /// The operand of a unary `+` or `-`.
    #[inline(never)]
    fn signed(&mut self, negative: bool, at: usize) -> Result<Sized> {
        let next = self.peek();
        let allowed = matches!(
            next.tok,
            Tok::Number(_) | Tok::Integer(_) | Tok::Duration(_) | Tok::LParen | Tok::Ident(_)
        );
        if !allowed {
            return Err(self.unexpected(&next, &["identifier", "number", "duration", "("]));
        }
        self.enter(at)?;
        let operand = self.unary();
        self.leave();
        let operand = operand?;
        let literal = |l: Literal| Ok(leaf(Expr::Literal(l)));
        match operand.expr {
            // A bound parameter can be `i64::MIN`, which Go negates to itself.
            Expr::Literal(Literal::Integer(v)) if negative => {
                literal(Literal::Integer(v.wrapping_neg()))
            }
            Expr::Literal(Literal::Float(v)) if negative => literal(Literal::Float(-v)),
            Expr::Literal(Literal::Duration(d)) if negative => {
                literal(Literal::Duration(crate::Duration(-d.0)))
            }
            Expr::Literal(Literal::Unsigned(v)) if negative => {
                if v == 1u64 << 63 {
                    literal(Literal::Integer(i64::MIN))
                } else {
                    let msg = format!("constant -{v} underflows int64");
                    Err(ParseError::bare(ErrorKind::Invalid, msg))
                }
            }
            Expr::Literal(l) => literal(l),
            other => Ok(Sized {
                height: operand.height + 1,
                expr: Expr::Binary {
                    lhs: Box::new(Expr::Literal(Literal::Integer(if negative {
                        -1
                    } else {
                        1
                    }))),
                    op: BinaryOp::Mul,
                    rhs: Box::new(other),
                },
            }),
        }
    }

    /// The arguments of a call whose name and `(` have been read. Each argument may be a
    /// regex (`mean(/re/)`); `mean()` has none.
    #[inline(never)]
    fn call(&mut self, name: &str, at: usize) -> Result<Sized> {
        self.enter(at)?;
        let args = self.call_args();
        self.leave();
        let (args, height) = args?;
        Ok(Sized {
            expr: Expr::Call {
                name: name.to_lowercase(),
                args,
            },
            height: height + 1,
        })
    }

    #[inline(never)]
    fn call_args(&mut self) -> Result<(Vec<Expr>, usize)> {
        let mut args = Vec::new();
        let mut height = 0;
        let mut first = true;
        loop {
            if let Some(re) = self.try_regex()? {
                args.push(Expr::Literal(Literal::Regex(re)));
                height = height.max(1);
            } else {
                if first {
                    let t = self.raw();
                    if t.tok == Tok::RParen {
                        self.advance(&t);
                        return Ok((args, height));
                    }
                }
                let arg = self.expr_sized()?;
                height = height.max(arg.height);
                args.push(arg.expr);
            }
            first = false;
            if self.peek().tok != Tok::Comma {
                break;
            }
            self.next();
        }
        self.expect(Tok::RParen, ")")?;
        Ok((args, height))
    }

    /// A field or tag reference whose first segment has been read, with its optional cast.
    fn var_ref(&mut self, first: String) -> Result<Expr> {
        let (segments, _) = self.continue_segments(first)?;
        let name = segments.join(".");
        let t = self.raw();
        if t.tok != Tok::DoubleColon {
            return Ok(Expr::VarRef {
                name,
                data_type: None,
            });
        }
        self.advance(&t);
        let cast = self.raw();
        let data_type = match &cast.tok {
            Tok::Ident(ty) => match ty.to_ascii_lowercase().as_str() {
                "float" => DataType::Float,
                "integer" => DataType::Integer,
                "unsigned" => DataType::Unsigned,
                "string" => DataType::String,
                "boolean" => DataType::Boolean,
                _ => {
                    let all = [
                        "float", "integer", "unsigned", "string", "boolean", "field", "tag",
                    ];
                    return Err(self.unexpected(&cast, &all));
                }
            },
            Tok::Keyword(Kw::Field) => DataType::Field,
            Tok::Keyword(Kw::Tag) => DataType::Tag,
            _ => {
                let all = ["float", "integer", "string", "boolean", "field", "tag"];
                return Err(self.unexpected(&cast, &all));
            }
        };
        self.advance(&cast);
        Ok(Expr::VarRef {
            name,
            data_type: Some(data_type),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::Regex;
    use crate::Duration;

    fn parse(s: &str) -> Expr {
        let mut p = Parser::new(s);
        p.parse_expr().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn err(s: &str) -> String {
        let mut p = Parser::new(s);
        match p.parse_expr() {
            Ok(e) => panic!("{s} parsed as {e:?}"),
            Err(e) => e.to_string(),
        }
    }

    fn var(name: &str) -> Expr {
        Expr::VarRef {
            name: name.into(),
            data_type: None,
        }
    }

    fn int(v: i64) -> Expr {
        Expr::Literal(Literal::Integer(v))
    }

    fn bin(lhs: Expr, op: BinaryOp, rhs: Expr) -> Expr {
        Expr::Binary {
            lhs: Box::new(lhs),
            op,
            rhs: Box::new(rhs),
        }
    }

    #[test]
    fn precedence_and_associativity() {
        use BinaryOp::*;
        assert_eq!(
            parse("a + b * c"),
            bin(var("a"), Add, bin(var("b"), Mul, var("c")))
        );
        assert_eq!(
            parse("a - b - c"),
            bin(bin(var("a"), Sub, var("b")), Sub, var("c"))
        );
        assert_eq!(
            parse("a = 1 OR b = 2 AND c = 3"),
            bin(
                bin(var("a"), Eq, int(1)),
                Or,
                bin(bin(var("b"), Eq, int(2)), And, bin(var("c"), Eq, int(3)))
            )
        );
        assert_eq!(
            parse("(a + b) * c"),
            bin(
                Expr::Paren(Box::new(bin(var("a"), Add, var("b")))),
                Mul,
                var("c")
            )
        );
        let re = |s: &str| Expr::Literal(Literal::Regex(Regex(s.into())));
        assert_eq!(
            parse("host =~ /^(a|b)$/ and dc !~ /x/"),
            bin(
                bin(var("host"), EqRegex, re("^(a|b)$")),
                And,
                bin(var("dc"), NotEqRegex, re("x"))
            )
        );
    }

    #[test]
    fn unary_minus_folds_into_literals() {
        assert_eq!(parse("-1"), int(-1));
        assert_eq!(parse("-1.5"), Expr::Literal(Literal::Float(-1.5)));
        assert_eq!(
            parse("-5m"),
            Expr::Literal(Literal::Duration(Duration(-300_000_000_000)))
        );
        assert_eq!(parse("-9223372036854775808"), int(i64::MIN));
        assert_eq!(
            parse("18446744073709551615"),
            Expr::Literal(Literal::Unsigned(u64::MAX))
        );
        assert_eq!(parse("-x"), bin(int(-1), BinaryOp::Mul, var("x")));
        assert_eq!(
            err("-9223372036854775809"),
            "constant -9223372036854775809 underflows int64"
        );
        assert_eq!(
            err("-+1"),
            "found +, expected identifier, number, duration, ( at line 1, char 2"
        );
    }

    #[test]
    fn calls_and_references() {
        assert_eq!(
            parse(r#"derivative(MEAN("value"), 1s)"#),
            Expr::Call {
                name: "derivative".into(),
                args: vec![
                    Expr::Call {
                        name: "mean".into(),
                        args: vec![var("value")]
                    },
                    Expr::Literal(Literal::Duration(Duration(1_000_000_000))),
                ]
            }
        );
        assert_eq!(
            parse("now()"),
            Expr::Call {
                name: "now".into(),
                args: vec![]
            }
        );
        assert_eq!(
            parse("mean( )"),
            Expr::Call {
                name: "mean".into(),
                args: vec![]
            }
        );
        let tag = Expr::VarRef {
            name: "host".into(),
            data_type: Some(DataType::Tag),
        };
        assert_eq!(parse(r#""host"::tag"#), tag);
        assert_eq!(parse("a.b"), var("a.b"));
        assert_eq!(parse("*::field"), Expr::Wildcard(Some(WildcardType::Field)));
        assert_eq!(
            parse("count(distinct value)"),
            Expr::Call {
                name: "count".into(),
                args: vec![Expr::Distinct("value".into())]
            }
        );
        assert_eq!(
            parse("mean(/cpu/)"),
            Expr::Call {
                name: "mean".into(),
                args: vec![Expr::Literal(Literal::Regex(Regex("cpu".into())))]
            }
        );
    }

    #[test]
    fn errors_match_influxdb() {
        assert_eq!(err("x::bogus"), "found bogus, expected float, integer, unsigned, string, boolean, field, tag at line 1, char 4");
        assert_eq!(
            err("x::1"),
            "found 1, expected float, integer, string, boolean, field, tag at line 1, char 4"
        );
        assert_eq!(
            err("*::float"),
            "found float, expected field, tag at line 1, char 4"
        );
        assert_eq!(err("a =~ 'x'"), "found x, expected regex at line 1, char 5");
        let trailing = crate::parse_expr("'x' 'y'").map_err(|e| e.to_string());
        assert_eq!(
            trailing,
            Err("found y, expected EOF at line 1, char 4".into())
        );
        assert_eq!(err("$timeFilter"), "missing parameter: timeFilter");
        assert_eq!(err("$"), "empty bound parameter");
        assert_eq!(err("10x"), "invalid duration");
        assert_eq!(err("mean(a"), "found EOF, expected ) at line 1, char 8");
        assert_eq!(err("mean(1"), "found EOF, expected ) at line 1, char 7");
        assert_eq!(err("(a"), "found EOF, expected ) at line 1, char 4");
    }

    #[test]
    fn nesting_limits() {
        let deep = format!("{}1{}", "(".repeat(300), ")".repeat(300));
        let mut p = Parser::new(&deep);
        assert_eq!(
            p.parse_expr().map_err(|e| e.kind()),
            Err(ErrorKind::TooDeep)
        );
        let ok = format!("{}1{}", "(".repeat(200), ")".repeat(200));
        assert!(Parser::new(&ok).parse_expr().is_ok());
        let chain = vec!["a"; 5_000].join(" OR ");
        let mut p = Parser::new(&chain);
        assert_eq!(
            p.parse_expr().map_err(|e| e.kind()),
            Err(ErrorKind::TooDeep)
        );
        let chain = vec!["a"; 900].join(" + ");
        assert!(Parser::new(&chain).parse_expr().is_ok());
    }
}
