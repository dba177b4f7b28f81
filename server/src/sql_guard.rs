//! Decides whether a `/sql` statement may run: one read-only statement that reaches nothing
//! outside the tenant's tables.
//!
//! It works on tokens, not text, so keywords inside string literals, quoted identifiers and
//! comments do not count, and casing or spacing tricks (`FiLe (`) do not help. The queries
//! also run on connections opened with `readonly = 1`, so a statement that slipped past this
//! check still could not write or change settings; this check is what refuses table functions
//! that read files, run programs or open network connections, which `readonly` allows.

use std::collections::HashSet;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("empty query")]
    Empty,
    #[error("only one statement per request is allowed")]
    MultipleStatements,
    #[error("only read-only statements (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN, EXISTS) are allowed; found {0}")]
    NotReadOnly(String),
    #[error("function {0}() is not allowed: it reaches files, programs or the network")]
    ForbiddenFunction(String),
    #[error("{0} is not allowed in /sql")]
    ForbiddenClause(&'static str),
    #[error("unterminated {0}")]
    Unterminated(&'static str),
    #[error("characters other than ASCII are allowed only in strings and quoted identifiers")]
    NonAscii,
    /// The engine's parse of the statement is not one this check can read: refused rather
    /// than run (the check fails closed).
    #[error("cannot establish that the statement only reads ({0})")]
    Unreadable(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token<'a> {
    Word(&'a str),
    /// A quoted identifier, with what is between its quotes (escapes left as written).
    Quoted(&'a str),
    Str,
    Number,
    Punct(char),
}

fn tokenize(sql: &str) -> Result<Vec<Token<'_>>, Refusal> {
    let b = sql.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i];
        match c {
            b' ' | b'\t' | b'\n' | b'\r' | b'\x0c' => i += 1,
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                // ClickHouse comments nest.
                let mut depth = 0;
                loop {
                    if i + 1 >= b.len() {
                        return Err(Refusal::Unterminated("comment"));
                    }
                    if b[i] == b'/' && b[i + 1] == b'*' {
                        depth += 1;
                        i += 2;
                    } else if b[i] == b'*' && b[i + 1] == b'/' {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            b'\'' | b'"' | b'`' => {
                let q = c;
                i += 1;
                let inner_start = i;
                loop {
                    match b.get(i) {
                        None => {
                            return Err(Refusal::Unterminated(if q == b'\'' {
                                "string literal"
                            } else {
                                "quoted identifier"
                            }))
                        }
                        Some(b'\\') => i += 2,
                        Some(&x) if x == q => {
                            if b.get(i + 1) == Some(&q) {
                                i += 2;
                            } else {
                                i += 1;
                                break;
                            }
                        }
                        Some(_) => i += 1,
                    }
                }
                out.push(if q == b'\'' {
                    Token::Str
                } else {
                    Token::Quoted(sql.get(inner_start..i - 1).unwrap_or_default())
                });
            }
            b'$' if b.get(i + 1) == Some(&b'$') || heredoc_tag(&b[i..]).is_some() => {
                let tag_len = if b.get(i + 1) == Some(&b'$') {
                    2
                } else {
                    heredoc_tag(&b[i..]).unwrap_or(2)
                };
                let tag = &b[i..i + tag_len];
                i += tag_len;
                let rest = &b[i..];
                let end = rest
                    .windows(tag.len())
                    .position(|w| w == tag)
                    .ok_or(Refusal::Unterminated("heredoc"))?;
                i += end + tag.len();
                out.push(Token::Str);
            }
            // The engine's lexer takes some non-ASCII characters (a no-break space) as
            // whitespace, so they could split what this check reads as one word: outside strings
            // and quoted identifiers, only ASCII is accepted.
            c if c >= 0x80 => return Err(Refusal::NonAscii),
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'$')
                {
                    i += 1;
                }
                out.push(Token::Word(&sql[start..i]));
            }
            c if c.is_ascii_digit() => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.' || b[i] == b'_')
                {
                    i += 1;
                }
                out.push(Token::Number);
            }
            c => {
                out.push(Token::Punct(c as char));
                i += 1;
            }
        }
    }
    Ok(out)
}

/// `$tag$` at the start of `b`, returning its length.
fn heredoc_tag(b: &[u8]) -> Option<usize> {
    let end = b[1..].iter().position(|&c| c == b'$')? + 1;
    let tag = &b[1..end];
    (!tag.is_empty() && tag.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_'))
        .then_some(end + 1)
}

/// Table functions that only compute or read the engine's own tables.
const SAFE_TABLE_FUNCTIONS: &[&str] = &[
    "numbers",
    "numbers_mt",
    "zeros",
    "zeros_mt",
    "generaterandom",
    "generate_series",
    "generateseries",
    "values",
    "view",
    "viewifpermitted",
    "merge",
    "null",
    "format",
    "primes",
];

/// Known to reach outside, whether or not this engine lists them as table functions.
const ALWAYS_FORBIDDEN: &[&str] = &[
    "file",
    "filecluster",
    "url",
    "urlcluster",
    "s3",
    "s3cluster",
    "gcs",
    "oss",
    "cosn",
    "azureblobstorage",
    "azureblobstoragecluster",
    "hdfs",
    "hdfscluster",
    "remote",
    "remotesecure",
    "cluster",
    "clusterallreplicas",
    "executable",
    "mysql",
    "postgresql",
    "mongodb",
    "redis",
    "sqlite",
    "jdbc",
    "odbc",
    "input",
    "python",
    "arrowstream",
    "iceberg",
    "icebergs3",
    "deltalake",
    "hudi",
    "arrowflight",
    "ytsaurus",
    "dictionary",
];

/// The policy: which function names are refused.
#[derive(Debug, Clone)]
pub struct Guard {
    forbidden: HashSet<String>,
}

impl Default for Guard {
    fn default() -> Self {
        Self::new(std::iter::empty::<String>())
    }
}

impl Guard {
    /// `table_functions` is what the engine offers (`system.table_functions`); every one not
    /// known to be safe is refused, so a table function added by a later engine is refused
    /// until someone decides otherwise.
    pub fn new<I, S>(table_functions: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut forbidden: HashSet<String> =
            ALWAYS_FORBIDDEN.iter().map(|s| s.to_string()).collect();
        for f in table_functions {
            let f = f.as_ref().to_ascii_lowercase();
            if !SAFE_TABLE_FUNCTIONS.contains(&f.as_str()) {
                forbidden.insert(f);
            }
        }
        Self { forbidden }
    }

    pub fn check(&self, sql: &str) -> Result<(), Refusal> {
        let tokens = tokenize(sql)?;
        // One statement, optionally followed by semicolons.
        if let Some(pos) = tokens.iter().position(|t| *t == Token::Punct(';')) {
            if tokens[pos..].iter().any(|t| *t != Token::Punct(';')) {
                return Err(Refusal::MultipleStatements);
            }
        }
        let first = tokens
            .iter()
            .find(|t| **t != Token::Punct('('))
            .ok_or(Refusal::Empty)?;
        match first {
            Token::Word(w)
                if [
                    "select", "with", "show", "describe", "desc", "explain", "exists",
                ]
                .contains(&w.to_ascii_lowercase().as_str()) => {}
            Token::Word(w) => return Err(Refusal::NotReadOnly(w.to_ascii_uppercase())),
            _ => {
                return Err(Refusal::NotReadOnly(
                    "a statement that is not a query".into(),
                ))
            }
        }
        for (i, t) in tokens.iter().enumerate() {
            // A function may be called by a quoted name too: `file`('x').
            let (Token::Word(w) | Token::Quoted(w)) = t else {
                continue;
            };
            let lw = w.to_ascii_lowercase();
            let next = tokens.get(i + 1);
            if next == Some(&Token::Punct('(')) && self.forbidden.contains(&lw) {
                return Err(Refusal::ForbiddenFunction(w.to_string()));
            }
            if matches!(t, Token::Quoted(_)) {
                continue;
            }
            match lw.as_str() {
                "settings" => return Err(Refusal::ForbiddenClause("SETTINGS")),
                "outfile" => return Err(Refusal::ForbiddenClause("INTO OUTFILE")),
                _ => {}
            }
        }
        Ok(())
    }
}

/// Statements (the root node of the engine's parse) that only read.
const READ_ONLY_ROOTS: &[&str] = &[
    "SelectWithUnionQuery",
    "SelectIntersectExceptQuery",
    "ShowTables",
    "ShowColumns",
    "ShowCreateTableQuery",
    "DescribeQuery",
    "ExistsTableQuery",
    "Explain",
];

impl Guard {
    /// The second line of defence: checks the engine's own parse of the statement (`EXPLAIN
    /// AST`, one node per line, children indented by one space). The root must be a
    /// statement that only reads, every function called anywhere must be allowed, and the
    /// root may carry nothing but its query and an output format (`INTO OUTFILE` adds a
    /// file name there). Anything this cannot read is refused.
    pub fn check_ast(&self, tree: &str) -> Result<(), Refusal> {
        let mut lines = tree.lines().filter(|l| !l.trim().is_empty());
        let root = lines.next().ok_or(Refusal::Empty)?;
        let root_kind = node_kind(root).ok_or_else(|| Refusal::Unreadable(excerpt(root)))?;
        if root.starts_with(' ') || !READ_ONLY_ROOTS.contains(&root_kind) {
            return Err(Refusal::NotReadOnly(root_kind.to_string()));
        }
        let mut root_children = 0;
        for line in lines {
            let depth = line.len() - line.trim_start_matches(' ').len();
            let kind = node_kind(line).ok_or_else(|| Refusal::Unreadable(excerpt(line)))?;
            if depth == 0 {
                return Err(Refusal::MultipleStatements);
            }
            if depth == 1 {
                root_children += 1;
                // `INTO OUTFILE 'path'` hangs its file name off the root, under any root.
                if kind == "Literal" {
                    return Err(Refusal::ForbiddenClause("INTO OUTFILE"));
                }
                if root_children > 1
                    && root_kind != "Explain"
                    && !matches!(kind, "Identifier" | "Set")
                {
                    return Err(Refusal::Unreadable(excerpt(line)));
                }
            }
            match kind {
                "Function" => {
                    let name = function_name(line);
                    if self.forbidden.contains(&name.to_ascii_lowercase()) {
                        return Err(Refusal::ForbiddenFunction(name.to_string()));
                    }
                }
                // EXPLAIN's own options are a `Set` right under it; anywhere else it is a
                // SETTINGS clause.
                "Set" if depth == 1 && root_kind == "Explain" => {}
                "Set" | "SetQuery" | "Settings" => {
                    return Err(Refusal::ForbiddenClause("SETTINGS"))
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Whether a parse tree (`EXPLAIN AST`) calls function or table function `name`.
pub fn calls(tree: &str, name: &str) -> bool {
    tree.lines()
        .filter(|l| node_kind(l) == Some("Function"))
        .any(|l| function_name(l).eq_ignore_ascii_case(name))
}

/// The node type of one line of `EXPLAIN AST` output: its first word, if it looks like one.
fn node_kind(line: &str) -> Option<&str> {
    let word = line.trim_start_matches(' ').split(' ').next()?;
    (!word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .then_some(word)
}

/// The name in a `Function name [(alias a)] [(children N)]` line: up to the first ` (`, so
/// an alias cannot hide it.
fn function_name(line: &str) -> &str {
    let rest = line.trim_start_matches(' ').trim_start_matches("Function ");
    rest.split(" (").next().unwrap_or(rest).trim_end()
}

fn excerpt(line: &str) -> String {
    line.trim().chars().take(60).collect()
}

/// The output format a statement asks for with a trailing `FORMAT name`, if any.
pub fn requested_format(sql: &str) -> Option<String> {
    let tokens = tokenize(sql).ok()?;
    let mut found = None;
    for w in tokens.windows(2) {
        if let [Token::Word(k), Token::Word(f)] = w {
            if k.eq_ignore_ascii_case("format") {
                found = Some(f.to_string());
            }
        }
    }
    found
}

/// The HTTP content type for a ClickHouse output format.
pub fn content_type(format: &str) -> &'static str {
    let f = format.to_ascii_lowercase();
    if f.starts_with("json") || f.starts_with("prettyjson") {
        "application/json"
    } else if f.starts_with("csv") {
        "text/csv; charset=utf-8"
    } else if f.starts_with("tsv") || f.starts_with("tabseparated") {
        "text/tab-separated-values; charset=utf-8"
    } else if f == "arrowstream" {
        "application/vnd.apache.arrow.stream"
    } else if f == "arrow" {
        "application/vnd.apache.arrow.file"
    } else if f == "parquet" {
        "application/vnd.apache.parquet"
    } else if f.starts_with("pretty") || f == "vertical" || f == "markdown" {
        "text/plain; charset=utf-8"
    } else {
        "application/octet-stream"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_finds_a_function_by_name_whatever_its_alias() {
        let tree = "SelectWithUnionQuery (children 1)\n ExpressionList (children 1)\n  SelectQuery (children 2)\n   TablesInSelectQuery (children 1)\n    TablesInSelectQueryElement (children 1)\n     TableExpression (children 1)\n      Function MERGE (alias x) (children 1)\n";
        assert!(calls(tree, "merge"));
        assert!(!calls(tree, "numbers"));
        assert!(!calls("SelectWithUnionQuery\n Identifier merge\n", "merge"));
    }

    fn guard() -> Guard {
        Guard::new([
            "file",
            "url",
            "numbers",
            "s3",
            "remote",
            "executable",
            "mysql",
            "newthing",
        ])
    }

    #[test]
    fn plain_reads_pass() {
        let g = guard();
        for q in [
            "SELECT 1",
            "select count() from `db_autogen_cpu` FORMAT JSONEachRow",
            "WITH x AS (SELECT 1) SELECT * FROM x",
            "(SELECT 1)",
            "SHOW TABLES",
            "DESCRIBE TABLE t",
            "EXPLAIN SELECT 1",
            "SELECT * FROM numbers(10);",
            "SELECT 'file(' AS s, `url(` FROM t -- file('x')\n",
            "SELECT /* s3( /* nested */ */ 1",
            "SELECT $$file('/etc/passwd')$$",
        ] {
            assert_eq!(g.check(q), Ok(()), "{q}");
        }
    }

    #[test]
    fn writes_settings_and_outside_access_are_refused() {
        let g = guard();
        let cases: &[(&str, Refusal)] = &[
            ("", Refusal::Empty),
            (
                "INSERT INTO t VALUES (1)",
                Refusal::NotReadOnly("INSERT".into()),
            ),
            (
                "CREATE TABLE x (a Int8) ENGINE=Memory",
                Refusal::NotReadOnly("CREATE".into()),
            ),
            ("DROP TABLE t", Refusal::NotReadOnly("DROP".into())),
            (
                "ALTER TABLE t DELETE WHERE 1",
                Refusal::NotReadOnly("ALTER".into()),
            ),
            ("SET readonly = 0", Refusal::NotReadOnly("SET".into())),
            ("SYSTEM SHUTDOWN", Refusal::NotReadOnly("SYSTEM".into())),
            ("SELECT 1; DROP TABLE t", Refusal::MultipleStatements),
            (
                "SELECT * FROM file('/etc/passwd')",
                Refusal::ForbiddenFunction("file".into()),
            ),
            (
                "SELECT * FROM FiLe ('/etc/passwd')",
                Refusal::ForbiddenFunction("FiLe".into()),
            ),
            (
                "SELECT * FROM url('http://x', CSV)",
                Refusal::ForbiddenFunction("url".into()),
            ),
            (
                "SELECT * FROM s3('http://x')",
                Refusal::ForbiddenFunction("s3".into()),
            ),
            (
                "SELECT * FROM remote('h', system.one)",
                Refusal::ForbiddenFunction("remote".into()),
            ),
            (
                "SELECT * FROM executable('x', CSV, 'a Int8')",
                Refusal::ForbiddenFunction("executable".into()),
            ),
            (
                "SELECT * FROM mysql('h', 'd', 't', 'u', 'p')",
                Refusal::ForbiddenFunction("mysql".into()),
            ),
            (
                "SELECT * FROM newthing()",
                Refusal::ForbiddenFunction("newthing".into()),
            ),
            (
                "SELECT * FROM t WHERE x IN (SELECT * FROM python('x'))",
                Refusal::ForbiddenFunction("python".into()),
            ),
            (
                "SELECT 1 SETTINGS readonly = 0",
                Refusal::ForbiddenClause("SETTINGS"),
            ),
            (
                "SELECT 1 INTO OUTFILE '/tmp/x'",
                Refusal::ForbiddenClause("INTO OUTFILE"),
            ),
            (
                "SELECT 'unterminated",
                Refusal::Unterminated("string literal"),
            ),
            (
                "SELECT `file`('/etc/passwd') AS x",
                Refusal::ForbiddenFunction("file".into()),
            ),
            (
                "SELECT \"FILE\"('/etc/passwd')",
                Refusal::ForbiddenFunction("FILE".into()),
            ),
            ("SELECT file\u{a0}('/etc/passwd') AS x", Refusal::NonAscii),
            ("SELECT 1 INTO\u{a0}OUTFILE '/tmp/x'", Refusal::NonAscii),
        ];
        for (q, want) in cases {
            assert_eq!(g.check(q).as_ref(), Err(want), "{q}");
        }
    }

    #[test]
    fn the_engines_parse_is_checked_and_anything_unreadable_is_refused() {
        let g = guard();
        let select = "SelectWithUnionQuery (children 1)\n ExpressionList (children 1)\n  SelectQuery (children 1)\n   ExpressionList (children 1)\n    Literal UInt64_1\n";
        assert_eq!(g.check_ast(select), Ok(()));
        let with_format = "SelectWithUnionQuery (children 2)\n ExpressionList (children 1)\n  SelectQuery (children 1)\n   ExpressionList (children 1)\n    Literal UInt64_1\n Identifier JSON\n";
        assert_eq!(g.check_ast(with_format), Ok(()));
        assert_eq!(g.check_ast("ShowTables\n"), Ok(()));
        let file = "SelectWithUnionQuery (children 1)\n ExpressionList (children 1)\n  SelectQuery (children 1)\n   ExpressionList (children 1)\n    Function file (children 1)\n     ExpressionList (children 1)\n      Literal \\'x\\'\n";
        assert_eq!(
            g.check_ast(file),
            Err(Refusal::ForbiddenFunction("file".into()))
        );
        let table_fn = "SelectWithUnionQuery (children 1)\n ExpressionList (children 1)\n  SelectQuery (children 2)\n   ExpressionList (children 1)\n    Asterisk\n   TablesInSelectQuery (children 1)\n    TablesInSelectQueryElement (children 1)\n     TableExpression (children 1)\n      Function NewThing (children 1)\n";
        assert_eq!(
            g.check_ast(table_fn),
            Err(Refusal::ForbiddenFunction("NewThing".into()))
        );
        let outfile = "SelectWithUnionQuery (children 2)\n ExpressionList (children 1)\n  SelectQuery (children 1)\n   ExpressionList (children 1)\n    Asterisk\n Literal \\'/tmp/x\\'\n";
        assert_eq!(
            g.check_ast(outfile),
            Err(Refusal::ForbiddenClause("INTO OUTFILE"))
        );
        assert_eq!(
            g.check_ast("InsertQuery (children 1)\n"),
            Err(Refusal::NotReadOnly("InsertQuery".into()))
        );
        // A second statement's output after the tree, or anything else unexpected.
        assert_eq!(
            g.check_ast(&format!("{select}2\n")),
            Err(Refusal::MultipleStatements)
        );
        assert!(matches!(
            g.check_ast(&format!("{select}  ???\n")),
            Err(Refusal::Unreadable(_))
        ));
        assert_eq!(g.check_ast(""), Err(Refusal::Empty));
        // An alias must not hide the function's name.
        let aliased = "SelectWithUnionQuery (children 1)\n ExpressionList (children 1)\n  SelectQuery (children 1)\n   ExpressionList (children 1)\n    Function file (alias x) (children 1)\n";
        assert_eq!(
            g.check_ast(aliased),
            Err(Refusal::ForbiddenFunction("file".into()))
        );
        // A file name under EXPLAIN or SHOW is INTO OUTFILE too.
        let explain_outfile = "Explain EXPLAIN SYNTAX (children 2)\n SelectWithUnionQuery (children 1)\n  ExpressionList (children 1)\n Literal \\'/tmp/x\\'\n";
        assert_eq!(
            g.check_ast(explain_outfile),
            Err(Refusal::ForbiddenClause("INTO OUTFILE"))
        );
        assert_eq!(
            g.check_ast("ShowTables (children 1)\n Literal \\'/tmp/x\\'\n"),
            Err(Refusal::ForbiddenClause("INTO OUTFILE"))
        );
        let settings = "SelectWithUnionQuery (children 1)\n ExpressionList (children 1)\n  SelectQuery (children 2)\n   ExpressionList (children 1)\n    Literal UInt64_1\n   Set\n";
        assert_eq!(
            g.check_ast(settings),
            Err(Refusal::ForbiddenClause("SETTINGS"))
        );
        let explain_options =
            "Explain EXPLAIN (children 2)\n Set\n SelectWithUnionQuery (children 1)\n";
        assert_eq!(g.check_ast(explain_options), Ok(()));
    }

    #[test]
    fn format_detection() {
        assert_eq!(
            requested_format("SELECT 1 FORMAT CSV").as_deref(),
            Some("CSV")
        );
        assert_eq!(requested_format("SELECT 'FORMAT CSV'"), None);
        assert_eq!(content_type("JSONEachRow"), "application/json");
        assert_eq!(
            content_type("ArrowStream"),
            "application/vnd.apache.arrow.stream"
        );
    }
}
