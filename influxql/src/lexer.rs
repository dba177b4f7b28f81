//! The scanner. It lexes one token at a time at a given character offset, because whether `/`
//! starts a regex or is a division depends on where the parser is, exactly as in InfluxDB's
//! scanner (which the parser asks for a regex explicitly).
//!
//! Besides the token, each call reports whether scanning it read past the end of the query.
//! InfluxDB's reader reports the end of input one character further once that has happened,
//! and its `found EOF ... at line 1, char N` positions depend on it.

use crate::token::{Kw, Tok, Token};

/// Whitespace as InfluxDB's scanner knows it; anything else (a non-breaking space, say) is an
/// illegal character there too.
pub(crate) fn is_ws(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

pub(crate) fn is_ident_first(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

pub(crate) fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Lexes the token starting at `at`. Returns the token and whether the end of input was
/// consumed while scanning it.
pub(crate) fn lex(chars: &[char], at: usize) -> (Token, bool) {
    let Some(&c) = chars.get(at) else {
        return (tok(Tok::Eof, at, at), false);
    };
    let next = chars.get(at + 1).copied();
    let one = |t: Tok| (tok(t, at, at + 1), false);
    let two = |t: Tok| (tok(t, at, at + 2), false);
    match c {
        c if is_ws(c) => {
            let end = run(chars, at, is_ws);
            // InfluxDB's reader turns `\r\n` and a lone `\r` into `\n`, and names it so.
            let text: String = chars[at..end].iter().collect::<String>();
            let text = text.replace("\r\n", "\n").replace('\r', "\n");
            (tok(Tok::Ws(text), at, end), end == chars.len())
        }
        c if is_ident_first(c) => bare_word(chars, at),
        c if c.is_ascii_digit() => (number(chars, at), false),
        '.' if next.is_some_and(|n| n.is_ascii_digit()) => (number(chars, at), false),
        '.' => one(Tok::Dot),
        '"' => quoted(chars, at, Tok::Ident),
        '\'' => quoted(chars, at, Tok::Str),
        '$' => {
            let end = run(chars, at + 1, is_ident_char);
            let name: String = chars[at + 1..end].iter().collect();
            if chars.get(end) == Some(&'"') {
                // InfluxDB names a broken quoted parameter `$` plus what it read, at the `$`.
                let (t, eof) = quoted(chars, end, Tok::Ident);
                let param = match t.tok {
                    Tok::Ident(q) => Tok::BoundParam(format!("${q}")),
                    Tok::BadString(s) | Tok::BadEscape(s) => Tok::Illegal(format!("${s}")),
                    other => other,
                };
                return (tok(param, at, t.end.max(at + 1)), eof);
            }
            let eof = end == chars.len();
            (tok(Tok::BoundParam(format!("${name}")), at, end), eof)
        }
        '+' => one(Tok::Add),
        '-' if next == Some('-') => {
            let newline = (at..chars.len()).find(|&i| matches!(chars[i], '\n' | '\r'));
            match newline {
                Some(i) => (tok(Tok::Comment, at, i + 1), false),
                None => (tok(Tok::Comment, at, chars.len()), true),
            }
        }
        '-' => one(Tok::Sub),
        '*' => one(Tok::Mul),
        '/' if next == Some('*') => {
            let close = (at + 2..chars.len().saturating_sub(1))
                .find(|&i| chars[i] == '*' && chars[i + 1] == '/');
            match close {
                Some(i) => (tok(Tok::Comment, at, i + 2), false),
                None => (tok(Tok::Illegal(String::new()), at, chars.len()), true),
            }
        }
        '/' => one(Tok::Div),
        '%' => one(Tok::Mod),
        '&' => one(Tok::BitAnd),
        '|' => one(Tok::BitOr),
        '^' => one(Tok::BitXor),
        '=' if next == Some('~') => two(Tok::EqRegex),
        '=' => one(Tok::Eq),
        '!' if next == Some('=') => two(Tok::Neq),
        '!' if next == Some('~') => two(Tok::NeqRegex),
        '>' if next == Some('=') => two(Tok::Gte),
        '>' => one(Tok::Gt),
        '<' if next == Some('=') => two(Tok::Lte),
        '<' if next == Some('>') => two(Tok::Neq),
        '<' => one(Tok::Lt),
        '(' => one(Tok::LParen),
        ')' => one(Tok::RParen),
        ',' => one(Tok::Comma),
        ';' => one(Tok::Semicolon),
        ':' if next == Some(':') => two(Tok::DoubleColon),
        ':' => one(Tok::Colon),
        other => one(Tok::Illegal(other.to_string())),
    }
}

/// Lexes a regex literal whose opening `/` is at `at`. `\/` stands for `/`; any other
/// backslash is kept as is, so the regex engine sees `\d`, `\.` and friends unchanged.
pub(crate) fn lex_regex(chars: &[char], at: usize) -> (Token, bool) {
    let mut out = String::new();
    let mut i = at + 1;
    loop {
        match chars.get(i) {
            None => return (tok(Tok::BadRegex, at, chars.len()), true),
            Some('/') => return (tok(Tok::Regex(out), at, i + 1), false),
            Some('\n' | '\r') => return (tok(Tok::BadRegex, at, i + 1), false),
            Some('\\') => match chars.get(i + 1) {
                None => return (tok(Tok::BadRegex, at, chars.len()), true),
                Some('/') => {
                    out.push('/');
                    i += 2;
                }
                Some(_) => {
                    out.push('\\');
                    i += 1;
                }
            },
            Some(&c) => {
                out.push(c);
                i += 1;
            }
        }
    }
}

fn tok(tok: Tok, start: usize, end: usize) -> Token {
    Token { tok, start, end }
}

fn run(chars: &[char], from: usize, pred: fn(char) -> bool) -> usize {
    let mut i = from;
    while i < chars.len() && pred(chars[i]) {
        i += 1;
    }
    i
}

/// A bare identifier or keyword. As in InfluxDB, a double quote straight after the bare part
/// makes the quoted part the identifier.
fn bare_word(chars: &[char], at: usize) -> (Token, bool) {
    let end = run(chars, at, is_ident_char);
    if chars.get(end) == Some(&'"') {
        let (t, eof) = quoted(chars, end, Tok::Ident);
        let start = if matches!(t.tok, Tok::Ident(_)) {
            at
        } else {
            t.start
        };
        return (Token { start, ..t }, eof);
    }
    let word: String = chars[at..end].iter().collect();
    let t = match Kw::lookup(&word) {
        Some(kw) => Tok::Keyword(kw),
        None => Tok::Ident(word),
    };
    (tok(t, at, end), end == chars.len())
}

/// A single- or double-quoted literal starting at the quote at `at`, with InfluxDB's escapes
/// (`\n`, `\\`, `\"`, `\'`). A newline or the end of input leaves it unterminated.
fn quoted(chars: &[char], at: usize, make: fn(String) -> Tok) -> (Token, bool) {
    let quote = chars[at];
    let mut out = String::new();
    let mut i = at + 1;
    loop {
        match chars.get(i) {
            None => return (tok(Tok::BadString(out), at, chars.len()), true),
            Some('\n' | '\r') => return (tok(Tok::BadString(out), at, i + 1), false),
            Some(&c) if c == quote => return (tok(make(out), at, i + 1), false),
            Some('\\') => {
                let unescaped = match chars.get(i + 1) {
                    Some('n') => '\n',
                    Some('\\') => '\\',
                    Some('"') => '"',
                    Some('\'') => '\'',
                    Some(&other) => {
                        let t = Tok::BadEscape(format!("\\{other}"));
                        return (tok(t, i + 1, i + 2), false);
                    }
                    None => {
                        return (tok(Tok::BadEscape("\\".into()), i + 1, i + 1), true);
                    }
                };
                out.push(unescaped);
                i += 2;
            }
            Some(&c) => {
                out.push(c);
                i += 1;
            }
        }
    }
}

/// Integers, decimals and duration literals (`10s`, `1h30m`, `1596240000000ms`). Like
/// InfluxDB, an integer followed by letters is a duration token even when the unit is wrong;
/// the duration parser rejects it later.
fn number(chars: &[char], at: usize) -> Token {
    let mut text = String::new();
    let mut i = run(chars, at, |c| c.is_ascii_digit());
    text.extend(&chars[at..i]);
    if chars.get(i) == Some(&'.') {
        i += 1;
        if chars.get(i).is_some_and(|c| c.is_ascii_digit()) {
            let end = run(chars, i, |c| c.is_ascii_digit());
            text.push('.');
            text.extend(&chars[i..end]);
            i = end;
        }
        return tok(Tok::Number(text), at, i);
    }
    let is_unit = |c: char| c.is_ascii_alphabetic() || c == 'µ';
    if chars.get(i).is_some_and(|&c| is_unit(c)) {
        let end = run(chars, i, |c| c.is_ascii_alphanumeric() || c == 'µ');
        text.extend(&chars[i..end]);
        return tok(Tok::Duration(text), at, end);
    }
    tok(Tok::Integer(text), at, i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(s: &str) -> Vec<Tok> {
        let chars: Vec<char> = s.chars().collect();
        let mut at = 0;
        let mut out = Vec::new();
        loop {
            let (t, _) = lex(&chars, at);
            if t.tok == Tok::Eof {
                return out;
            }
            assert!(t.end > at, "no progress at {at} in {s:?}");
            at = t.end;
            if !t.tok.is_trivia() {
                out.push(t.tok);
            }
        }
    }

    fn ident(s: &str) -> Tok {
        Tok::Ident(s.into())
    }

    #[test]
    fn words_and_quotes() {
        assert_eq!(
            all(r#"select "a b" FROM m_1 "x\"y\\z""#),
            vec![
                Tok::Keyword(Kw::Select),
                ident("a b"),
                Tok::Keyword(Kw::From),
                ident("m_1"),
                ident(r#"x"y\z"#),
            ]
        );
        assert_eq!(
            all(r"'it\'s' '\\'"),
            vec![Tok::Str("it's".into()), Tok::Str("\\".into())]
        );
        assert_eq!(all(r#""""#), vec![ident("")]);
        assert_eq!(all("'open"), vec![Tok::BadString("open".into())]);
        assert_eq!(all(r"'a\qb'")[0], Tok::BadEscape(r"\q".into()));
        assert_eq!(all(r#"abc"def""#), vec![ident("def")]);
        assert_eq!(
            all("$timeFilter"),
            vec![Tok::BoundParam("$timeFilter".into())]
        );
    }

    #[test]
    fn numbers_and_durations() {
        assert_eq!(
            all("1 2.5 .5 10s 1h30m 1596240000000ms 10µs 10x"),
            vec![
                Tok::Integer("1".into()),
                Tok::Number("2.5".into()),
                Tok::Number(".5".into()),
                Tok::Duration("10s".into()),
                Tok::Duration("1h30m".into()),
                Tok::Duration("1596240000000ms".into()),
                Tok::Duration("10µs".into()),
                Tok::Duration("10x".into()),
            ]
        );
        assert_eq!(all("10.5h"), vec![Tok::Number("10.5".into()), ident("h")]);
    }

    #[test]
    fn operators_and_comments() {
        assert_eq!(
            all("a<>b != c =~ d !~ e <= f >= g :: h -- note\n% /* x */ &|^"),
            vec![
                ident("a"),
                Tok::Neq,
                ident("b"),
                Tok::Neq,
                ident("c"),
                Tok::EqRegex,
                ident("d"),
                Tok::NeqRegex,
                ident("e"),
                Tok::Lte,
                ident("f"),
                Tok::Gte,
                ident("g"),
                Tok::DoubleColon,
                ident("h"),
                Tok::Mod,
                Tok::BitAnd,
                Tok::BitOr,
                Tok::BitXor,
            ]
        );
        assert_eq!(all("!"), vec![Tok::Illegal("!".into())]);
        assert_eq!(all("/* open"), vec![Tok::Illegal(String::new())]);
        assert_eq!(all("\u{a0}"), vec![Tok::Illegal("\u{a0}".into())]);
    }

    #[test]
    fn regexes() {
        let lex_re = |s: &str| {
            let chars: Vec<char> = s.chars().collect();
            lex_regex(&chars, 0).0
        };
        assert_eq!(lex_re("/^(a|b)$/").tok, Tok::Regex("^(a|b)$".into()));
        assert_eq!(lex_re(r"/a\/b\.c/ x").tok, Tok::Regex(r"a/b\.c".into()));
        assert_eq!(lex_re(r"/a\/b\.c/ x").end, 9);
        assert_eq!(lex_re("/(?i)cp/").tok, Tok::Regex("(?i)cp".into()));
        assert_eq!(lex_re("/open").tok, Tok::BadRegex);
        assert_eq!(lex_re("/a\nb/").tok, Tok::BadRegex);
        assert_eq!(lex_re(r"/a\").tok, Tok::BadRegex);
    }

    #[test]
    fn end_of_input_consumption() {
        let consumed = |s: &str| {
            let chars: Vec<char> = s.chars().collect();
            lex(&chars, 0).1
        };
        assert!(consumed("word"));
        assert!(consumed("  "));
        assert!(consumed("'open"));
        assert!(!consumed("10"));
        assert!(!consumed("\"q\""));
        assert!(!consumed("="));
        assert!(!consumed("word more"));
    }
}
