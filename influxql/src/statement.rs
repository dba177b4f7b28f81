//! Statement dispatch on the leading keywords, with InfluxDB 1.8's keyword tree: the same
//! keywords are recognised, and an unknown one is reported with the same alternatives in the
//! same order (`found FOO, expected SELECT, DELETE, SHOW, ...`).

use crate::ast::{CardinalityOf, Statement, TagKeyFilter};
use crate::parser::{Parser, Result};
use crate::token::{Kw, Tok};

/// What follows a keyword path: a statement sluice parses, one it only recognises, or more
/// keywords.
enum Node {
    Parse(Handler),
    Unsupported,
    Branch(&'static [(Kw, Node)]),
}

#[derive(Clone, Copy)]
enum Handler {
    Select,
    ShowDatabases,
    ShowFieldKeys,
    /// `SHOW <kind> [EXACT] CARDINALITY`, `exact` once `EXACT` has been read.
    Cardinality(Counted, bool),
    ShowMeasurements,
    ShowRetentionPolicies,
    ShowSeries,
    ShowTagKeys,
    ShowTagValues,
    CreateDatabase,
}

/// What a `SHOW ... CARDINALITY` reached through the keyword tree counts.
#[derive(Clone, Copy)]
enum Counted {
    Measurements,
    TagKeys,
    FieldKeys,
}

use Node::{Branch, Parse, Unsupported};

/// `EXACT CARDINALITY` or `CARDINALITY` after the keywords naming what is counted.
const fn cardinality(what: Counted) -> Node {
    Branch(match what {
        Counted::Measurements => &[
            (
                Kw::Exact,
                Parse(Handler::Cardinality(Counted::Measurements, true)),
            ),
            (
                Kw::Cardinality,
                Parse(Handler::Cardinality(Counted::Measurements, false)),
            ),
        ],
        Counted::TagKeys => &[
            (
                Kw::Exact,
                Parse(Handler::Cardinality(Counted::TagKeys, true)),
            ),
            (
                Kw::Cardinality,
                Parse(Handler::Cardinality(Counted::TagKeys, false)),
            ),
        ],
        Counted::FieldKeys => &[
            (
                Kw::Exact,
                Parse(Handler::Cardinality(Counted::FieldKeys, true)),
            ),
            (
                Kw::Cardinality,
                Parse(Handler::Cardinality(Counted::FieldKeys, false)),
            ),
        ],
    })
}

const SHOW: &[(Kw, Node)] = &[
    (Kw::Continuous, Branch(&[(Kw::Queries, Unsupported)])),
    (Kw::Databases, Parse(Handler::ShowDatabases)),
    (Kw::Diagnostics, Unsupported),
    (
        Kw::Field,
        Branch(&[
            (Kw::Key, cardinality(Counted::FieldKeys)),
            (Kw::Keys, Parse(Handler::ShowFieldKeys)),
        ]),
    ),
    (Kw::Grants, Branch(&[(Kw::For, Unsupported)])),
    (Kw::Measurement, cardinality(Counted::Measurements)),
    (Kw::Measurements, Parse(Handler::ShowMeasurements)),
    (Kw::Queries, Unsupported),
    (
        Kw::Retention,
        Branch(&[(Kw::Policies, Parse(Handler::ShowRetentionPolicies))]),
    ),
    (Kw::Series, Parse(Handler::ShowSeries)),
    (Kw::Shard, Branch(&[(Kw::Groups, Unsupported)])),
    (Kw::Shards, Unsupported),
    (Kw::Stats, Unsupported),
    (Kw::Subscriptions, Unsupported),
    (
        Kw::Tag,
        Branch(&[
            (Kw::Key, cardinality(Counted::TagKeys)),
            (Kw::Keys, Parse(Handler::ShowTagKeys)),
            (Kw::Values, Parse(Handler::ShowTagValues)),
        ]),
    ),
    (Kw::Users, Unsupported),
];

const CREATE: &[(Kw, Node)] = &[
    (Kw::Continuous, Branch(&[(Kw::Query, Unsupported)])),
    (Kw::Database, Parse(Handler::CreateDatabase)),
    (Kw::User, Unsupported),
    (Kw::Retention, Branch(&[(Kw::Policy, Unsupported)])),
    (Kw::Subscription, Unsupported),
];

const DROP: &[(Kw, Node)] = &[
    (Kw::Continuous, Branch(&[(Kw::Query, Unsupported)])),
    (Kw::Database, Unsupported),
    (Kw::Measurement, Unsupported),
    (Kw::Retention, Branch(&[(Kw::Policy, Unsupported)])),
    (Kw::Series, Unsupported),
    (Kw::Shard, Unsupported),
    (Kw::Subscription, Unsupported),
    (Kw::User, Unsupported),
];

const STATEMENTS: &[(Kw, Node)] = &[
    (Kw::Select, Parse(Handler::Select)),
    (Kw::Delete, Unsupported),
    (Kw::Show, Branch(SHOW)),
    (Kw::Create, Branch(CREATE)),
    (Kw::Drop, Branch(DROP)),
    (Kw::Explain, Unsupported),
    (Kw::Grant, Unsupported),
    (Kw::Revoke, Unsupported),
    (
        Kw::Alter,
        Branch(&[(Kw::Retention, Branch(&[(Kw::Policy, Unsupported)]))]),
    ),
    (
        Kw::Set,
        Branch(&[(Kw::Password, Branch(&[(Kw::For, Unsupported)]))]),
    ),
    (Kw::Kill, Branch(&[(Kw::Query, Unsupported)])),
];

impl Parser {
    /// Statements separated by `;`. An empty query, or one of only separators, yields none.
    pub(crate) fn parse_query(&mut self) -> Result<Vec<Statement>> {
        let mut out = Vec::new();
        let mut separated = true;
        loop {
            let t = self.peek();
            match t.tok {
                Tok::Eof => {
                    return match self.take_deferred() {
                        Some(e) => Err(e),
                        None => Ok(out),
                    }
                }
                Tok::Semicolon => {
                    self.advance(&t);
                    separated = true;
                }
                _ if !separated => return Err(self.unexpected(&t, &[";"])),
                _ => {
                    out.push(self.parse_statement()?);
                    separated = false;
                }
            }
        }
    }

    fn parse_statement(&mut self) -> Result<Statement> {
        let start = self.peek().start;
        let mut kind: Vec<&'static str> = Vec::new();
        let mut nodes = STATEMENTS;
        loop {
            let t = self.next();
            let found = match &t.tok {
                Tok::Keyword(kw) => nodes.iter().find(|(k, _)| k == kw),
                _ => None,
            };
            let Some((kw, node)) = found else {
                let expected: Vec<&str> = nodes.iter().map(|(k, _)| k.name()).collect();
                return Err(self.unexpected(&t, &expected));
            };
            kind.push(kw.name());
            match node {
                Branch(next) => nodes = next,
                Unsupported => return Ok(self.skip_unsupported(kind.join(" "), start)),
                Parse(handler) => return self.dispatch(*handler),
            }
        }
    }

    fn dispatch(&mut self, handler: Handler) -> Result<Statement> {
        Ok(match handler {
            Handler::Select => Statement::Select(Box::new(self.parse_select()?)),
            Handler::ShowDatabases => Statement::ShowDatabases,
            Handler::ShowFieldKeys => Statement::ShowFieldKeys(self.parse_show_field_keys()?),
            Handler::Cardinality(counted, exact) => {
                if exact {
                    self.expect_kw(Kw::Cardinality)?;
                }
                let of = match counted {
                    Counted::Measurements => CardinalityOf::Measurements,
                    Counted::TagKeys => CardinalityOf::TagKeys,
                    Counted::FieldKeys => CardinalityOf::FieldKeys,
                };
                Statement::ShowCardinality(self.parse_cardinality(of, exact)?)
            }
            Handler::ShowMeasurements => {
                Statement::ShowMeasurements(self.parse_show_measurements()?)
            }
            Handler::ShowRetentionPolicies => Statement::ShowRetentionPolicies {
                database: self.parse_on()?,
            },
            Handler::ShowSeries => self.parse_show_series()?,
            Handler::ShowTagKeys => Statement::ShowTagKeys(self.parse_show_tag_keys()?),
            Handler::ShowTagValues => {
                let exact = self.eat_kw(Kw::Exact);
                if exact || self.eat_kw(Kw::Cardinality) {
                    if exact {
                        self.expect_kw(Kw::Cardinality)?;
                    }
                    // The key filter is read in its place, after `FROM`.
                    let of = CardinalityOf::TagValues(TagKeyFilter::In(Vec::new()));
                    return Ok(Statement::ShowCardinality(
                        self.parse_cardinality(of, exact)?,
                    ));
                }
                Statement::ShowTagValues(self.parse_show_tag_values()?)
            }
            Handler::CreateDatabase => Statement::CreateDatabase(self.parse_create_database()?),
        })
    }

    /// Skips the rest of a statement sluice does not implement, up to the next `;` or the
    /// end, and returns it for the caller to refuse on its own.
    fn skip_unsupported(&mut self, kind: String, start: usize) -> Statement {
        let mut end = self.pos;
        let mut regex_may_follow = false;
        loop {
            // A `;` inside a regex (`DROP SERIES FROM /a;b/`) must not end the statement.
            if regex_may_follow {
                let before = self.pos;
                if let Ok(Some(_)) = self.try_regex() {
                    end = self.pos;
                    regex_may_follow = false;
                    continue;
                }
                self.pos = before;
            }
            let t = self.peek();
            if matches!(t.tok, Tok::Eof | Tok::Semicolon) {
                break;
            }
            regex_may_follow = matches!(
                t.tok,
                Tok::Keyword(Kw::From | Kw::By | Kw::Select)
                    | Tok::Comma
                    | Tok::LParen
                    | Tok::Eq
                    | Tok::EqRegex
                    | Tok::NeqRegex
            );
            self.advance(&t);
            end = t.end;
        }
        let text: String = self.chars[start.min(end)..end].iter().collect();
        Statement::Unsupported {
            kind,
            text: text.trim().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::ast::Statement;

    fn err(q: &str) -> String {
        match crate::parse(q) {
            Ok(s) => panic!("{q} parsed as {s:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn unknown_statements_list_the_alternatives() {
        assert_eq!(err("blah blah"), "found blah, expected SELECT, DELETE, SHOW, CREATE, DROP, EXPLAIN, GRANT, REVOKE, ALTER, SET, KILL at line 1, char 1");
        assert_eq!(err("SHOW FOO"), "found FOO, expected CONTINUOUS, DATABASES, DIAGNOSTICS, FIELD, GRANTS, MEASUREMENT, MEASUREMENTS, QUERIES, RETENTION, SERIES, SHARD, SHARDS, STATS, SUBSCRIPTIONS, TAG, USERS at line 1, char 6");
        assert_eq!(err("DROP FOO"), "found FOO, expected CONTINUOUS, DATABASE, MEASUREMENT, RETENTION, SERIES, SHARD, SUBSCRIPTION, USER at line 1, char 6");
        assert_eq!(err("CREATE FOO"), "found FOO, expected CONTINUOUS, DATABASE, USER, RETENTION, SUBSCRIPTION at line 1, char 8");
        assert_eq!(
            err("SHOW RETENTION"),
            "found EOF, expected POLICIES at line 1, char 16"
        );
        assert_eq!(
            err("SHOW RETENTION ON"),
            "found ON, expected POLICIES at line 1, char 16"
        );
        assert_eq!(
            err("SHOW RETENTION POLICIES ON"),
            "found EOF, expected identifier at line 1, char 28"
        );
        assert_eq!(
            err("SHOW CONTINUOUS"),
            "found EOF, expected QUERIES at line 1, char 17"
        );
        assert_eq!(
            err("SHOW SHARD"),
            "found EOF, expected GROUPS at line 1, char 12"
        );
        assert_eq!(err("KILL"), "found EOF, expected QUERY at line 1, char 6");
        assert_eq!(err("$SHOW$DATABASES"), "found $SHOW, expected SELECT, DELETE, SHOW, CREATE, DROP, EXPLAIN, GRANT, REVOKE, ALTER, SET, KILL at line 1, char 1");
        assert_eq!(
            err("SHOW DATABASES foo"),
            "found foo, expected ; at line 1, char 16"
        );
    }

    #[test]
    fn unsupported_statements_are_skipped_whole() {
        let stmts = crate::parse("SHOW DATABASES; DROP DATABASE \"x;y\" ; show users;SHOW TAG VALUES CARDINALITY WITH KEY = host")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(stmts.len(), 4);
        assert_eq!(stmts[0], Statement::ShowDatabases);
        assert_eq!(
            stmts[1],
            Statement::Unsupported {
                kind: "DROP DATABASE".into(),
                text: "DROP DATABASE \"x;y\"".into()
            }
        );
        assert_eq!(
            stmts[2],
            Statement::Unsupported {
                kind: "SHOW USERS".into(),
                text: "show users".into()
            }
        );
        assert!(matches!(&stmts[3], Statement::ShowCardinality(_)));
    }

    #[test]
    fn skipping_respects_regexes() {
        let q = "DROP SERIES FROM /a;b/ WHERE x =~ /;/; DELETE WHERE a = 1 / 2; SHOW DATABASES";
        let stmts = crate::parse(q).unwrap_or_else(|e| panic!("{e}"));
        let texts: Vec<&str> = stmts
            .iter()
            .filter_map(|s| match s {
                Statement::Unsupported { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            texts,
            [
                "DROP SERIES FROM /a;b/ WHERE x =~ /;/",
                "DELETE WHERE a = 1 / 2"
            ]
        );
        assert_eq!(stmts.get(2), Some(&Statement::ShowDatabases));
    }

    #[test]
    fn separators() {
        assert_eq!(crate::parse(""), Ok(vec![]));
        assert_eq!(crate::parse(" ;; ; "), Ok(vec![]));
        assert_eq!(
            crate::parse("SHOW DATABASES;;SHOW DATABASES;"),
            Ok(vec![Statement::ShowDatabases, Statement::ShowDatabases])
        );
    }
}
