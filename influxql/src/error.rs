//! Parse errors worded like InfluxDB 1.8's, so that clients which match on InfluxDB's messages
//! (and people used to them) see the same text. The server adds the `error parsing query: `
//! prefix itself.

use std::fmt;

/// A 1-based line and character position. Characters are Unicode scalar values counted from
/// the start of the line, and `\r\n` ends a line once, as InfluxDB's scanner counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pos {
    pub line: usize,
    pub column: usize,
}

impl Pos {
    /// Converts a character offset into `chars` to a position. Offsets past the end keep
    /// counting on the last line: InfluxDB reports a missing token one or two characters
    /// after the last one.
    pub(crate) fn at(chars: &[char], offset: usize) -> Pos {
        let (mut line, mut column) = (1, 1);
        let end = offset.min(chars.len());
        let mut i = 0;
        while i < end {
            match chars[i] {
                '\n' => {
                    line += 1;
                    column = 1;
                }
                '\r' => {
                    if chars.get(i + 1) == Some(&'\n') && i + 1 < end {
                        i += 1;
                    }
                    line += 1;
                    column = 1;
                }
                _ => column += 1,
            }
            i += 1;
        }
        Pos {
            line,
            column: column + (offset - end),
        }
    }
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, char {}", self.line, self.column)
    }
}

/// What went wrong, for callers that answer differently (for instance an HTTP status) per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// An unexpected token: `found X, expected Y`.
    Syntax,
    /// Well-formed tokens that InfluxDB rejects all the same (a bad duration, an invalid
    /// GROUP BY dimension, an unbound `$parameter`, ...).
    Invalid,
    /// A statement InfluxDB parses but then refuses when it compiles it (an invalid GROUP BY
    /// dimension). InfluxDB answers these as that statement's error, not as
    /// `error parsing query`; any true parse error elsewhere in the query wins over them.
    Compile,
    /// Valid InfluxQL that sluice does not implement (`SELECT ... INTO`).
    Unsupported,
    /// Nesting deeper than sluice accepts, refused before it could exhaust the stack.
    TooDeep,
}

/// A query that could not be parsed. `Display` gives InfluxDB's wording, for instance
/// `found FROM, expected identifier, string, number, bool at line 1, char 8`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.message)]
pub struct ParseError(Box<Inner>);

/// Boxed so that `Result`s stay small on the parser's recursive path.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Inner {
    kind: ErrorKind,
    message: String,
    pos: Option<Pos>,
    found: Option<String>,
    expected: Vec<String>,
}

impl ParseError {
    pub(crate) fn syntax(found: &str, expected: &[&str], pos: Pos) -> ParseError {
        ParseError::new(Inner {
            kind: ErrorKind::Syntax,
            message: format!("found {found}, expected {} at {pos}", expected.join(", ")),
            pos: Some(pos),
            found: Some(found.to_string()),
            expected: expected.iter().map(|e| e.to_string()).collect(),
        })
    }

    /// A message followed by InfluxDB's ` at line L, char C`.
    pub(crate) fn at(kind: ErrorKind, message: &str, pos: Pos) -> ParseError {
        ParseError::new(Inner {
            kind,
            message: format!("{message} at {pos}"),
            pos: Some(pos),
            found: None,
            expected: Vec::new(),
        })
    }

    /// A message InfluxDB prints without a position.
    pub(crate) fn bare(kind: ErrorKind, message: impl Into<String>) -> ParseError {
        ParseError::new(Inner {
            kind,
            message: message.into(),
            pos: None,
            found: None,
            expected: Vec::new(),
        })
    }

    /// A message that carries its position inside the text, as InfluxDB words some errors.
    pub(crate) fn custom(kind: ErrorKind, message: String, pos: Pos) -> ParseError {
        ParseError::new(Inner {
            kind,
            message,
            pos: Some(pos),
            found: None,
            expected: Vec::new(),
        })
    }

    #[cold]
    fn new(inner: Inner) -> ParseError {
        ParseError(Box::new(inner))
    }

    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// The full message, as `Display` prints it.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// Where the error was found, when InfluxDB reports a position for it.
    pub fn position(&self) -> Option<Pos> {
        self.0.pos
    }

    /// For syntax errors: the offending token as InfluxDB names it (`EOF` at the end).
    pub fn found(&self) -> Option<&str> {
        self.0.found.as_deref()
    }

    /// For syntax errors: what would have been accepted instead.
    pub fn expected(&self) -> &[String] {
        &self.0.expected
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chars(s: &str) -> Vec<char> {
        s.chars().collect()
    }

    #[test]
    fn positions_count_characters_and_lines() {
        let c = chars("ab\ncd");
        assert_eq!(Pos::at(&c, 0), Pos { line: 1, column: 1 });
        assert_eq!(Pos::at(&c, 3), Pos { line: 2, column: 1 });
        assert_eq!(Pos::at(&c, 5), Pos { line: 2, column: 3 });
        assert_eq!(Pos::at(&c, 6), Pos { line: 2, column: 4 });
        let c = chars("é\r\nx\ry");
        assert_eq!(Pos::at(&c, 3), Pos { line: 2, column: 1 });
        assert_eq!(Pos::at(&c, 5), Pos { line: 3, column: 1 });
        let c = chars("µs");
        assert_eq!(Pos::at(&c, 1), Pos { line: 1, column: 2 });
    }

    #[test]
    fn messages_follow_influxdb() {
        let p = Pos { line: 1, column: 8 };
        let e = ParseError::syntax("FROM", &["identifier", "string", "number", "bool"], p);
        assert_eq!(
            e.to_string(),
            "found FROM, expected identifier, string, number, bool at line 1, char 8"
        );
        assert_eq!(e.kind(), ErrorKind::Syntax);
        assert_eq!(e.found(), Some("FROM"));
        assert_eq!(e.expected().len(), 4);
        assert_eq!(e.position(), Some(p));
        let e = ParseError::at(ErrorKind::Invalid, "invalid duration", p);
        assert_eq!(e.to_string(), "invalid duration at line 1, char 8");
        let e = ParseError::bare(ErrorKind::Invalid, "fill must be a function call");
        assert_eq!(e.message(), "fill must be a function call");
        assert_eq!(e.position(), None);
    }
}
