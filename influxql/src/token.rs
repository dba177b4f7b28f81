//! Tokens and keywords. The keyword set is InfluxDB 1.8's: a bare word in it is never an
//! identifier (`SELECT "values" FROM m` needs the quotes), and error messages name keywords in
//! upper case whatever case the query used.

macro_rules! keywords {
    ($($kw:ident),* $(,)?) => {
        /// A reserved word. `And`/`Or` double as operators and `True`/`False` as literals.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub(crate) enum Kw { $($kw),* }

        const KEYWORDS: &[(&str, Kw)] = &[$((stringify!($kw), Kw::$kw)),*];
    };
}

keywords!(
    All,
    Alter,
    Analyze,
    And,
    Any,
    As,
    Asc,
    Begin,
    By,
    Cardinality,
    Continuous,
    Create,
    Database,
    Databases,
    Default,
    Delete,
    Desc,
    Destinations,
    Diagnostics,
    Distinct,
    Drop,
    Duration,
    End,
    Every,
    Exact,
    Explain,
    False,
    Field,
    For,
    From,
    Grant,
    Grants,
    Group,
    Groups,
    In,
    Inf,
    Insert,
    Into,
    Key,
    Keys,
    Kill,
    Limit,
    Measurement,
    Measurements,
    Name,
    Offset,
    On,
    Or,
    Order,
    Password,
    Policies,
    Policy,
    Privileges,
    Queries,
    Query,
    Read,
    Replication,
    Resample,
    Retention,
    Revoke,
    Select,
    Series,
    Set,
    Shard,
    Shards,
    Show,
    Slimit,
    Soffset,
    Stats,
    Subscription,
    Subscriptions,
    Tag,
    To,
    True,
    User,
    Users,
    Values,
    Where,
    With,
    Write,
);

impl Kw {
    /// Case-insensitive keyword lookup.
    pub(crate) fn lookup(word: &str) -> Option<Kw> {
        KEYWORDS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(word))
            .map(|&(_, kw)| kw)
    }

    /// The upper-case spelling InfluxDB uses in messages.
    pub(crate) fn name(self) -> &'static str {
        KEYWORD_NAMES.get(self as usize).copied().unwrap_or("")
    }
}

const KEYWORD_NAMES: &[&str] = &[
    "ALL",
    "ALTER",
    "ANALYZE",
    "AND",
    "ANY",
    "AS",
    "ASC",
    "BEGIN",
    "BY",
    "CARDINALITY",
    "CONTINUOUS",
    "CREATE",
    "DATABASE",
    "DATABASES",
    "DEFAULT",
    "DELETE",
    "DESC",
    "DESTINATIONS",
    "DIAGNOSTICS",
    "DISTINCT",
    "DROP",
    "DURATION",
    "END",
    "EVERY",
    "EXACT",
    "EXPLAIN",
    "FALSE",
    "FIELD",
    "FOR",
    "FROM",
    "GRANT",
    "GRANTS",
    "GROUP",
    "GROUPS",
    "IN",
    "INF",
    "INSERT",
    "INTO",
    "KEY",
    "KEYS",
    "KILL",
    "LIMIT",
    "MEASUREMENT",
    "MEASUREMENTS",
    "NAME",
    "OFFSET",
    "ON",
    "OR",
    "ORDER",
    "PASSWORD",
    "POLICIES",
    "POLICY",
    "PRIVILEGES",
    "QUERIES",
    "QUERY",
    "READ",
    "REPLICATION",
    "RESAMPLE",
    "RETENTION",
    "REVOKE",
    "SELECT",
    "SERIES",
    "SET",
    "SHARD",
    "SHARDS",
    "SHOW",
    "SLIMIT",
    "SOFFSET",
    "STATS",
    "SUBSCRIPTION",
    "SUBSCRIPTIONS",
    "TAG",
    "TO",
    "TRUE",
    "USER",
    "USERS",
    "VALUES",
    "WHERE",
    "WITH",
    "WRITE",
];

/// One lexical token. Literal payloads are already unescaped.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Eof,
    /// Whitespace, kept as text because InfluxDB names it so in a few messages.
    Ws(String),
    Comment,
    /// A bare or double-quoted identifier.
    Ident(String),
    Keyword(Kw),
    /// `$name` with no value bound to it (reaching one in an expression is an error), or a
    /// value that could not be bound, named by why (see [`crate::params`]).
    BoundParam(String),
    Integer(String),
    Number(String),
    Duration(String),
    Str(String),
    /// An unterminated string or quoted identifier, with the text read so far.
    BadString(String),
    /// An unknown escape such as `\q`.
    BadEscape(String),
    Regex(String),
    /// A regex broken by a newline or the end of the query.
    BadRegex,
    Illegal(String),
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    BitAnd,
    BitOr,
    BitXor,
    Eq,
    Neq,
    EqRegex,
    NeqRegex,
    Lt,
    Lte,
    Gt,
    Gte,
    LParen,
    RParen,
    Comma,
    Colon,
    DoubleColon,
    Semicolon,
    Dot,
}

impl Tok {
    /// How InfluxDB names the token after `found`: the literal text when there is one,
    /// otherwise the token's name (`EOF`, `FROM`, `(`, ...).
    pub(crate) fn found_text(&self) -> String {
        let lit_or = |lit: &str, name: &str| {
            if lit.is_empty() {
                name.to_string()
            } else {
                lit.to_string()
            }
        };
        match self {
            Tok::Eof => "EOF".into(),
            Tok::Ws(s) => lit_or(s, "WS"),
            Tok::Comment => "COMMENT".into(),
            Tok::Ident(s) => lit_or(s, "IDENT"),
            Tok::Keyword(k) => k.name().into(),
            Tok::BoundParam(s) => lit_or(s, "BOUNDPARAM"),
            Tok::Integer(s) => lit_or(s, "INTEGER"),
            Tok::Number(s) => lit_or(s, "NUMBER"),
            Tok::Duration(s) => lit_or(s, "DURATIONVAL"),
            Tok::Str(s) => lit_or(s, "STRING"),
            Tok::BadString(s) => lit_or(s, "BADSTRING"),
            Tok::BadEscape(s) => lit_or(s, "BADESCAPE"),
            Tok::Regex(s) => lit_or(s, "REGEX"),
            Tok::BadRegex => "BADREGEX".into(),
            Tok::Illegal(s) => lit_or(s, "ILLEGAL"),
            other => other.symbol().unwrap_or("ILLEGAL").into(),
        }
    }

    fn symbol(&self) -> Option<&'static str> {
        Some(match self {
            Tok::Add => "+",
            Tok::Sub => "-",
            Tok::Mul => "*",
            Tok::Div => "/",
            Tok::Mod => "%",
            Tok::BitAnd => "&",
            Tok::BitOr => "|",
            Tok::BitXor => "^",
            Tok::Eq => "=",
            Tok::Neq => "!=",
            Tok::EqRegex => "=~",
            Tok::NeqRegex => "!~",
            Tok::Lt => "<",
            Tok::Lte => "<=",
            Tok::Gt => ">",
            Tok::Gte => ">=",
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::Comma => ",",
            Tok::Colon => ":",
            Tok::DoubleColon => "::",
            Tok::Semicolon => ";",
            Tok::Dot => ".",
            _ => return None,
        })
    }

    pub(crate) fn is_kw(&self, kw: Kw) -> bool {
        matches!(self, Tok::Keyword(k) if *k == kw)
    }

    pub(crate) fn is_trivia(&self) -> bool {
        matches!(self, Tok::Ws(_) | Tok::Comment)
    }
}

/// A token and the character offsets it spans.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token {
    pub tok: Tok,
    pub start: usize,
    pub end: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyword_names_line_up() {
        assert_eq!(KEYWORDS.len(), KEYWORD_NAMES.len());
        for (name, kw) in KEYWORDS {
            assert_eq!(kw.name(), name.to_ascii_uppercase(), "{name}");
        }
        assert_eq!(Kw::lookup("select"), Some(Kw::Select));
        assert_eq!(Kw::lookup("LiMiT"), Some(Kw::Limit));
        assert_eq!(Kw::lookup("value"), None);
        assert_eq!(Kw::lookup("time"), None);
    }

    #[test]
    fn found_text_prefers_the_literal() {
        assert_eq!(Tok::Eof.found_text(), "EOF");
        assert_eq!(Tok::Keyword(Kw::From).found_text(), "FROM");
        assert_eq!(Tok::Ident("cpu".into()).found_text(), "cpu");
        assert_eq!(Tok::Ident(String::new()).found_text(), "IDENT");
        assert_eq!(Tok::Str(String::new()).found_text(), "STRING");
        assert_eq!(Tok::Gte.found_text(), ">=");
        assert_eq!(Tok::Ws(" ".into()).found_text(), " ");
    }
}
