//! The parser's cursor and the small pieces every statement shares: identifiers, integers,
//! durations, regexes, measurement sources, WHERE, ORDER BY, LIMIT.
//!
//! The structure follows InfluxDB's Go parser closely, including where it looks at raw
//! characters rather than tokens (a regex may only start where InfluxDB would try one, and a
//! call needs its `(` right after the name), so that queries are accepted, rejected and
//! reported exactly as InfluxDB 1.8 does.

use crate::ast::{Measurement, MeasurementName, Regex, SortOrder};
use crate::display::ident_needs_quotes;
use crate::duration::{parse_duration, Duration};
use crate::error::{ErrorKind, ParseError, Pos};
use crate::lexer::{is_ws, lex, lex_regex};
use crate::params::{bind, Params};
use crate::token::{Kw, Tok, Token};

pub(crate) type Result<T> = std::result::Result<T, ParseError>;

/// How deeply parentheses, function calls and subqueries may nest. Parsing recurses once
/// per level, so a hostile `((((...` must be refused before the stack runs out.
pub const MAX_NESTING: usize = 256;

pub(crate) struct Parser {
    pub(crate) chars: Vec<char>,
    pub(crate) pos: usize,
    /// Whether scanning has read past the end of the query; InfluxDB then reports the end of
    /// input one character further on.
    eof_consumed: bool,
    depth: usize,
    /// The first error InfluxDB would only raise after the whole query parsed (when it
    /// compiles a statement). Any later parse error takes precedence over it.
    deferred: Option<ParseError>,
    /// Values for `$name` parameters, bound as they are scanned.
    params: Params,
}

impl Parser {
    pub(crate) fn new(query: &str) -> Parser {
        Parser::with_params(query, Params::new())
    }

    pub(crate) fn with_params(query: &str, params: Params) -> Parser {
        Parser {
            chars: query.chars().collect(),
            pos: 0,
            eof_consumed: false,
            depth: 0,
            deferred: None,
            params,
        }
    }

    fn lex_at(&mut self, at: usize) -> Token {
        let (mut t, consumed) = lex(&self.chars, at);
        self.eof_consumed |= consumed;
        if t.tok == Tok::Eof {
            t.start = self.chars.len() + usize::from(self.eof_consumed);
        }
        if let Tok::BoundParam(param) = &t.tok {
            if let Some(bound) = bind(param, &self.params) {
                t.tok = bound;
            }
        }
        t
    }

    /// The token at the cursor, whitespace and comments included.
    pub(crate) fn raw(&mut self) -> Token {
        self.lex_at(self.pos)
    }

    /// The next significant token, without consuming it.
    pub(crate) fn peek(&mut self) -> Token {
        let mut at = self.pos;
        loop {
            let t = self.lex_at(at);
            if !t.tok.is_trivia() {
                return t;
            }
            at = t.end;
        }
    }

    /// Consumes and returns the next significant token.
    pub(crate) fn next(&mut self) -> Token {
        let t = self.peek();
        self.advance(&t);
        t
    }

    pub(crate) fn advance(&mut self, t: &Token) {
        self.pos = t.end.max(self.pos);
    }

    pub(crate) fn pos_at(&self, offset: usize) -> Pos {
        Pos::at(&self.chars, offset)
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn unexpected(&self, t: &Token, expected: &[&str]) -> ParseError {
        ParseError::syntax(&t.tok.found_text(), expected, self.token_pos(t))
    }

    /// Where InfluxDB reports a token. Its scanner steps back one character before reading
    /// a string or regex and reports that position, so those point at the character before
    /// the opening quote or slash; sluice reports the same place. A bound parameter's value
    /// is reported at its `$`.
    pub(crate) fn token_pos(&self, t: &Token) -> Pos {
        let steps_back = matches!(
            t.tok,
            Tok::Str(_) | Tok::BadString(_) | Tok::Regex(_) | Tok::BadRegex
        ) && self.chars.get(t.start) != Some(&'$');
        if !steps_back || t.start == 0 {
            return self.pos_at(t.start);
        }
        let mut prev = t.start - 1;
        if prev > 0 && self.chars.get(prev) == Some(&'\n') && self.chars[prev - 1] == '\r' {
            prev -= 1;
        }
        self.pos_at(prev)
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn invalid_at(&self, message: &str, offset: usize) -> ParseError {
        ParseError::at(ErrorKind::Invalid, message, self.pos_at(offset))
    }

    /// Consumes `kw` if it comes next.
    pub(crate) fn eat_kw(&mut self, kw: Kw) -> bool {
        let t = self.peek();
        let found = t.tok.is_kw(kw);
        if found {
            self.advance(&t);
        }
        found
    }

    pub(crate) fn expect_kw(&mut self, kw: Kw) -> Result<()> {
        let t = self.next();
        if t.tok.is_kw(kw) {
            Ok(())
        } else {
            Err(self.unexpected(&t, &[kw.name()]))
        }
    }

    /// Consumes the next token if it is `tok`; otherwise reports it as InfluxDB does.
    pub(crate) fn expect(&mut self, tok: Tok, name: &str) -> Result<()> {
        let t = self.next();
        if t.tok == tok {
            Ok(())
        } else {
            Err(self.unexpected(&t, &[name]))
        }
    }

    /// Enters one level of nesting at `offset`, refusing to go past [`MAX_NESTING`].
    pub(crate) fn enter(&mut self, offset: usize) -> Result<()> {
        if self.depth >= MAX_NESTING {
            let msg = format!("query nested more than {MAX_NESTING} levels deep");
            return Err(ParseError::at(
                ErrorKind::TooDeep,
                &msg,
                self.pos_at(offset),
            ));
        }
        self.depth += 1;
        Ok(())
    }

    /// Records an error to report once the query has parsed; the first one is kept.
    pub(crate) fn defer(&mut self, e: ParseError) {
        self.deferred.get_or_insert(e);
    }

    pub(crate) fn take_deferred(&mut self) -> Option<ParseError> {
        self.deferred.take()
    }

    pub(crate) fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// Consumes a single whitespace token, as InfluxDB does before looking for a regex.
    fn skip_ws(&mut self) {
        if self.chars.get(self.pos).is_some_and(|&c| is_ws(c)) {
            let t = self.raw();
            self.advance(&t);
        }
    }

    pub(crate) fn parse_ident(&mut self) -> Result<String> {
        let t = self.next();
        match t.tok {
            Tok::Ident(name) => Ok(name),
            _ => Err(self.unexpected(&t, &["identifier"])),
        }
    }

    /// `ident [, ident]*`.
    pub(crate) fn parse_ident_list(&mut self) -> Result<Vec<String>> {
        let mut out = vec![self.parse_ident()?];
        while self.peek().tok == Tok::Comma {
            self.next();
            out.push(self.parse_ident()?);
        }
        Ok(out)
    }

    /// A regex if one starts here. Like InfluxDB, this looks at the raw characters after at
    /// most one run of whitespace, so a regex may only appear where the grammar allows one;
    /// a parameter bound to a regex counts as one there.
    pub(crate) fn try_regex(&mut self) -> Result<Option<Regex>> {
        self.skip_ws();
        match self.chars.get(self.pos) {
            None => {
                self.eof_consumed = true;
                Ok(None)
            }
            Some('$') => {
                let t = self.raw();
                match t.tok {
                    Tok::Regex(source) => {
                        self.pos = t.end;
                        Ok(Some(Regex(source)))
                    }
                    _ => Ok(None),
                }
            }
            Some('/') => {
                let (t, consumed) = lex_regex(&self.chars, self.pos);
                self.eof_consumed |= consumed;
                self.advance(&t);
                match t.tok {
                    Tok::Regex(source) => Ok(Some(Regex(source))),
                    _ => Err(ParseError::at(
                        ErrorKind::Invalid,
                        "bad regex: unterminated regex",
                        self.token_pos(&t),
                    )),
                }
            }
            Some(_) => Ok(None),
        }
    }

    /// A regex that must come next (after `=~`, `!~`).
    pub(crate) fn expect_regex(&mut self) -> Result<Regex> {
        match self.try_regex()? {
            Some(re) => Ok(re),
            None => {
                let t = self.peek();
                Err(self.unexpected(&t, &["regex"]))
            }
        }
    }

    /// `ident[.ident[.ident]]`, where an empty middle segment (`db..m`) is allowed. Stops
    /// before a `/` after a dot, which starts a regex (`"rp"./re/`); the flag says so.
    pub(crate) fn parse_segmented_idents(&mut self) -> Result<(Vec<String>, bool)> {
        let first = self.parse_ident()?;
        self.continue_segments(first)
    }

    pub(crate) fn continue_segments(&mut self, first: String) -> Result<(Vec<String>, bool)> {
        let mut idents = vec![first];
        let mut regex_next = false;
        loop {
            let t = self.raw();
            if t.tok != Tok::Dot {
                break;
            }
            self.advance(&t);
            match self.chars.get(self.pos) {
                Some('/') => {
                    regex_next = true;
                    break;
                }
                Some(':') => break,
                Some('.') => idents.push(String::new()),
                None => {
                    self.eof_consumed = true;
                    idents.push(self.parse_ident()?);
                }
                Some(_) => idents.push(self.parse_ident()?),
            }
        }
        if idents.len() > 3 {
            let msg = format!("too many segments in {}", quote_segments(&idents));
            return Err(ParseError::at(
                ErrorKind::Invalid,
                &msg,
                Pos { line: 1, column: 1 },
            ));
        }
        Ok((idents, regex_next))
    }

    /// A measurement or regex source (`FROM` clauses, `WITH MEASUREMENT`).
    pub(crate) fn parse_measurement(&mut self) -> Result<Measurement> {
        let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_string());
        if let Some(re) = self.try_regex()? {
            return Ok(Measurement {
                database: None,
                retention_policy: None,
                name: MeasurementName::Regex(re),
            });
        }
        let (idents, regex_next) = self.parse_segmented_idents()?;
        let re = match idents.len() {
            3 => None,
            _ if regex_next => self.try_regex()?,
            _ => {
                // InfluxDB reads a regex after the name only straight after a dot. When a
                // `/` follows the next token instead (`FROM rp /re/`, `FROM a,/re/`), its
                // scanner hands back that token where it wanted the regex, and InfluxDB
                // reports exactly that.
                let t = self.raw();
                if t.tok != Tok::Eof && self.chars.get(t.end) == Some(&'/') {
                    return Err(self.unexpected(&t, &["regex"]));
                }
                None
            }
        };
        let (db, rp, name) = match (idents.as_slice(), re) {
            ([db, rp, name], _) => (
                non_empty(db),
                non_empty(rp),
                MeasurementName::Name(name.clone()),
            ),
            ([rp], Some(re)) => (None, non_empty(rp), MeasurementName::Regex(re)),
            ([name], None) => (None, None, MeasurementName::Name(name.clone())),
            ([db, rp], Some(re)) => (non_empty(db), non_empty(rp), MeasurementName::Regex(re)),
            ([rp, name], None) => (None, non_empty(rp), MeasurementName::Name(name.clone())),
            _ => (None, None, MeasurementName::Name(String::new())),
        };
        Ok(Measurement {
            database: db,
            retention_policy: rp,
            name,
        })
    }

    /// Comma-separated measurements, for the `FROM` of SHOW statements (no subqueries).
    pub(crate) fn parse_measurements(&mut self) -> Result<Vec<Measurement>> {
        let mut out = vec![self.parse_measurement()?];
        while self.peek().tok == Tok::Comma {
            self.next();
            out.push(self.parse_measurement()?);
        }
        Ok(out)
    }

    /// `[ON db]`.
    pub(crate) fn parse_on(&mut self) -> Result<Option<String>> {
        if self.eat_kw(Kw::On) {
            return self.parse_ident().map(Some);
        }
        Ok(None)
    }

    /// `[FROM measurements]` of SHOW statements.
    pub(crate) fn parse_show_from(&mut self) -> Result<Vec<Measurement>> {
        if self.eat_kw(Kw::From) {
            return self.parse_measurements();
        }
        Ok(Vec::new())
    }

    /// `[WHERE expr]`.
    pub(crate) fn parse_condition(&mut self) -> Result<Option<crate::ast::Expr>> {
        if self.eat_kw(Kw::Where) {
            return self.parse_expr().map(Some);
        }
        Ok(None)
    }

    /// `[ORDER BY time [ASC|DESC]]`, or `ORDER BY ASC|DESC`. InfluxDB 1.x orders by time
    /// only and says so for anything else.
    pub(crate) fn parse_order_by(&mut self) -> Result<Option<SortOrder>> {
        if !self.eat_kw(Kw::Order) {
            return Ok(None);
        }
        self.expect_kw(Kw::By)?;
        let only_time = || {
            ParseError::bare(
                ErrorKind::Invalid,
                "only ORDER BY time supported at this time",
            )
        };
        let t = self.next();
        let order = match &t.tok {
            Tok::Keyword(Kw::Asc) => SortOrder::Ascending,
            Tok::Keyword(Kw::Desc) => SortOrder::Descending,
            Tok::Ident(name) => {
                let order = self.parse_direction();
                if name != "time" {
                    return Err(only_time());
                }
                order
            }
            _ => return Err(self.unexpected(&t, &["identifier", "ASC", "DESC"])),
        };
        if self.peek().tok == Tok::Comma {
            self.next();
            self.parse_ident()?;
            self.parse_direction();
            return Err(only_time());
        }
        Ok(Some(order))
    }

    fn parse_direction(&mut self) -> SortOrder {
        if self.eat_kw(Kw::Desc) {
            SortOrder::Descending
        } else {
            self.eat_kw(Kw::Asc);
            SortOrder::Ascending
        }
    }

    /// `[kw n]` for LIMIT, OFFSET, SLIMIT and SOFFSET. Like InfluxDB, a value too large for
    /// a signed 64-bit integer is clamped rather than refused, and 0 is no clause at all
    /// (`LIMIT 0` limits nothing).
    pub(crate) fn parse_optional_int(&mut self, kw: Kw) -> Result<Option<u64>> {
        if !self.eat_kw(kw) {
            return Ok(None);
        }
        let t = self.next();
        match &t.tok {
            // Only a bound parameter gives a negative integer here.
            Tok::Integer(digits) if digits.starts_with('-') => {
                Err(self.invalid_at(&format!("{} must be >= 0", kw.name()), t.start))
            }
            Tok::Integer(digits) => {
                let n = digits.parse::<u64>().unwrap_or(u64::MAX);
                Ok((n > 0).then_some(n.min(i64::MAX as u64)))
            }
            _ => Err(self.unexpected(&t, &["integer"])),
        }
    }

    /// An integer within `[min, max]`, as `REPLICATION n` takes it.
    pub(crate) fn parse_int_in(&mut self, min: i64, max: i64) -> Result<i64> {
        let t = self.next();
        let Tok::Integer(digits) = &t.tok else {
            return Err(self.unexpected(&t, &["integer"]));
        };
        let Ok(n) = digits.parse::<i64>() else {
            let msg = format!("strconv.Atoi: parsing \"{digits}\": value out of range");
            return Err(self.invalid_at(&msg, t.start));
        };
        if n < min || n > max {
            let msg = format!("invalid value {n}: must be {min} <= n <= {max}");
            return Err(self.invalid_at(&msg, t.start));
        }
        Ok(n)
    }

    /// A duration value or `INF` (zero, meaning infinite) for retention options.
    pub(crate) fn parse_policy_duration(&mut self) -> Result<Duration> {
        let t = self.next();
        match &t.tok {
            Tok::Keyword(Kw::Inf) => Ok(Duration(0)),
            Tok::Duration(text) => {
                parse_duration(text).map_err(|e| self.invalid_at(&e.to_string(), t.start))
            }
            _ => Err(self.unexpected(&t, &["duration"])),
        }
    }
}

/// Segments as InfluxDB quotes them in messages: every segment but the last is quoted.
fn quote_segments(segments: &[String]) -> String {
    let last = segments.len().saturating_sub(1);
    let parts: Vec<String> = segments
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let quote = ident_needs_quotes(s)
                || (i < last && !s.is_empty())
                || ((i == 0 || i == last) && s.is_empty());
            let escaped = s
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            if quote {
                format!("\"{escaped}\"")
            } else {
                escaped
            }
        })
        .collect();
    parts.join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measurement(s: &str) -> Measurement {
        let mut p = Parser::new(s);
        p.parse_measurement().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn named(db: Option<&str>, rp: Option<&str>, name: &str) -> Measurement {
        Measurement {
            database: db.map(String::from),
            retention_policy: rp.map(String::from),
            name: MeasurementName::Name(name.into()),
        }
    }

    fn regex(db: Option<&str>, rp: Option<&str>, re: &str) -> Measurement {
        Measurement {
            database: db.map(String::from),
            retention_policy: rp.map(String::from),
            name: MeasurementName::Regex(Regex(re.into())),
        }
    }

    #[test]
    fn measurement_forms() {
        assert_eq!(measurement("cpu"), named(None, None, "cpu"));
        assert_eq!(measurement(r#""cpu load""#), named(None, None, "cpu load"));
        assert_eq!(measurement(r#""rp"."m""#), named(None, Some("rp"), "m"));
        assert_eq!(
            measurement(r#""db"."rp"."m""#),
            named(Some("db"), Some("rp"), "m")
        );
        assert_eq!(measurement("db..m"), named(Some("db"), None, "m"));
        assert_eq!(measurement("/^cpu/"), regex(None, None, "^cpu"));
        assert_eq!(measurement(r#""rp"./re/"#), regex(None, Some("rp"), "re"));
        assert_eq!(
            measurement(r#""db"."rp"./re/"#),
            regex(Some("db"), Some("rp"), "re")
        );
        assert_eq!(measurement("db../re/"), regex(Some("db"), None, "re"));
    }

    #[test]
    fn too_many_segments() {
        let mut p = Parser::new("a.b.c.d");
        let e = p.parse_measurement().map_err(|e| e.to_string());
        assert_eq!(
            e,
            Err(r#"too many segments in "a"."b"."c".d at line 1, char 1"#.into())
        );
    }

    #[test]
    fn order_and_limits() {
        let mut p = Parser::new("ORDER BY time DESC LIMIT 10 OFFSET 99999999999999999999");
        assert_eq!(p.parse_order_by(), Ok(Some(SortOrder::Descending)));
        assert_eq!(p.parse_optional_int(Kw::Limit), Ok(Some(10)));
        assert_eq!(p.parse_optional_int(Kw::Offset), Ok(Some(i64::MAX as u64)));
        let mut p = Parser::new("LIMIT 0 SLIMIT 00");
        assert_eq!(p.parse_optional_int(Kw::Limit), Ok(None));
        assert_eq!(p.parse_optional_int(Kw::Slimit), Ok(None));
        let mut p = Parser::new("ORDER BY DESC");
        assert_eq!(p.parse_order_by(), Ok(Some(SortOrder::Descending)));
        let mut p = Parser::new("order by time");
        assert_eq!(p.parse_order_by(), Ok(Some(SortOrder::Ascending)));
        let mut p = Parser::new("ORDER BY host");
        let e = p.parse_order_by().map_err(|e| e.to_string());
        assert_eq!(e, Err("only ORDER BY time supported at this time".into()));
    }

    #[test]
    fn nesting_is_bounded() {
        let mut p = Parser::new("");
        for _ in 0..MAX_NESTING {
            assert!(p.enter(0).is_ok());
        }
        let e = p.enter(0).map_err(|e| e.kind());
        assert_eq!(e, Err(ErrorKind::TooDeep));
    }
}
