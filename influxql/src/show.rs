//! The metadata statements clients send (`SHOW MEASUREMENTS`, `SHOW TAG VALUES`, ...) and
//! `CREATE DATABASE`, each with InfluxDB 1.8's clauses in InfluxDB's order.

use crate::ast::{
    CardinalityOf, CreateDatabase, RetentionPolicySpec, ShowCardinality, ShowFieldKeys,
    ShowMeasurements, ShowSeries, ShowTagKeys, ShowTagValues, Statement, TagKeyFilter,
};
use crate::parser::{Parser, Result};
use crate::token::{Kw, Tok};

impl Parser {
    /// `SHOW MEASUREMENTS [ON db] [WITH MEASUREMENT =|=~ source] [WHERE] [ORDER BY]
    /// [LIMIT] [OFFSET]`.
    pub(crate) fn parse_show_measurements(&mut self) -> Result<ShowMeasurements> {
        let database = self.parse_on()?;
        let with_measurement = if self.eat_kw(Kw::With) {
            self.expect_kw(Kw::Measurement)?;
            let op = self.next();
            if !matches!(op.tok, Tok::Eq | Tok::EqRegex) {
                return Err(self.unexpected(&op, &["=", "=~"]));
            }
            Some(self.parse_measurement()?)
        } else {
            None
        };
        Ok(ShowMeasurements {
            database,
            with_measurement,
            condition: self.parse_condition()?,
            order: self.parse_order_by()?,
            limit: self.parse_optional_int(Kw::Limit)?,
            offset: self.parse_optional_int(Kw::Offset)?,
        })
    }

    /// `SHOW TAG KEYS [ON db] [FROM] [WHERE] [ORDER BY] [LIMIT] [OFFSET] [SLIMIT] [SOFFSET]`.
    pub(crate) fn parse_show_tag_keys(&mut self) -> Result<ShowTagKeys> {
        Ok(ShowTagKeys {
            database: self.parse_on()?,
            sources: self.parse_show_from()?,
            condition: self.parse_condition()?,
            order: self.parse_order_by()?,
            limit: self.parse_optional_int(Kw::Limit)?,
            offset: self.parse_optional_int(Kw::Offset)?,
            slimit: self.parse_optional_int(Kw::Slimit)?,
            soffset: self.parse_optional_int(Kw::Soffset)?,
        })
    }

    /// `SHOW TAG VALUES [ON db] [FROM] WITH KEY ... [WHERE] [ORDER BY] [LIMIT] [OFFSET]`.
    pub(crate) fn parse_show_tag_values(&mut self) -> Result<ShowTagValues> {
        Ok(ShowTagValues {
            database: self.parse_on()?,
            sources: self.parse_show_from()?,
            key: self.parse_with_key()?,
            condition: self.parse_condition()?,
            order: self.parse_order_by()?,
            limit: self.parse_optional_int(Kw::Limit)?,
            offset: self.parse_optional_int(Kw::Offset)?,
        })
    }

    /// `WITH KEY = "k" | != "k" | IN ("a", "b") | =~ /re/ | !~ /re/`.
    fn parse_with_key(&mut self) -> Result<TagKeyFilter> {
        self.expect_kw(Kw::With)?;
        self.expect_kw(Kw::Key)?;
        let op = self.next();
        match op.tok {
            Tok::Keyword(Kw::In) => {
                self.expect(Tok::LParen, "(")?;
                let keys = self.parse_ident_list()?;
                self.expect(Tok::RParen, ")")?;
                Ok(TagKeyFilter::In(keys))
            }
            Tok::Eq => Ok(TagKeyFilter::Eq(self.parse_ident()?)),
            Tok::Neq => Ok(TagKeyFilter::NotEq(self.parse_ident()?)),
            Tok::EqRegex => Ok(TagKeyFilter::Regex(self.expect_regex()?)),
            Tok::NeqRegex => Ok(TagKeyFilter::NotRegex(self.expect_regex()?)),
            _ => Err(self.unexpected(&op, &["IN", "=", "=~"])),
        }
    }

    /// `SHOW FIELD KEYS [ON db] [FROM] [ORDER BY] [LIMIT] [OFFSET]`.
    pub(crate) fn parse_show_field_keys(&mut self) -> Result<ShowFieldKeys> {
        Ok(ShowFieldKeys {
            database: self.parse_on()?,
            sources: self.parse_show_from()?,
            order: self.parse_order_by()?,
            limit: self.parse_optional_int(Kw::Limit)?,
            offset: self.parse_optional_int(Kw::Offset)?,
        })
    }

    /// `SHOW SERIES ...` or `SHOW SERIES [EXACT] CARDINALITY ...`. As in InfluxDB, an `EXACT`
    /// not followed by `CARDINALITY` is ignored.
    pub(crate) fn parse_show_series(&mut self) -> Result<Statement> {
        let exact = self.eat_kw(Kw::Exact);
        if self.eat_kw(Kw::Cardinality) {
            return Ok(Statement::ShowCardinality(
                self.parse_cardinality(CardinalityOf::Series, exact)?,
            ));
        }
        Ok(Statement::ShowSeries(ShowSeries {
            database: self.parse_on()?,
            sources: self.parse_show_from()?,
            condition: self.parse_condition()?,
            order: self.parse_order_by()?,
            limit: self.parse_optional_int(Kw::Limit)?,
            offset: self.parse_optional_int(Kw::Offset)?,
        }))
    }

    /// `[ON db] [FROM] [WHERE] [GROUP BY] [LIMIT] [OFFSET]` after `... CARDINALITY`, with a
    /// `WITH KEY ...` after `FROM` for tag values (whose filter `of` holds a placeholder).
    pub(crate) fn parse_cardinality(
        &mut self,
        of: CardinalityOf,
        exact: bool,
    ) -> Result<ShowCardinality> {
        let database = self.parse_on()?;
        let sources = self.parse_show_from()?;
        let of = match of {
            CardinalityOf::TagValues(_) => CardinalityOf::TagValues(self.parse_with_key()?),
            other => other,
        };
        Ok(ShowCardinality {
            of,
            exact,
            database,
            sources,
            condition: self.parse_condition()?,
            group_by: self.parse_dimensions()?,
            limit: self.parse_optional_int(Kw::Limit)?,
            offset: self.parse_optional_int(Kw::Offset)?,
        })
    }

    /// `CREATE DATABASE name [WITH [DURATION d] [REPLICATION n] [SHARD DURATION d]
    /// [NAME rp]]`; the options are optional but, as in InfluxDB, must come in this order.
    pub(crate) fn parse_create_database(&mut self) -> Result<CreateDatabase> {
        let name = self.parse_ident()?;
        if !self.eat_kw(Kw::With) {
            return Ok(CreateDatabase {
                name,
                retention_policy: None,
            });
        }
        let first = self.peek();
        let options = [Kw::Duration, Kw::Name, Kw::Replication, Kw::Shard];
        if !options.iter().any(|&kw| first.tok.is_kw(kw)) {
            return Err(self.unexpected(&first, &["DURATION", "NAME", "REPLICATION", "SHARD"]));
        }
        let mut spec = RetentionPolicySpec::default();
        if self.eat_kw(Kw::Duration) {
            spec.duration = Some(self.parse_policy_duration()?);
        }
        if self.eat_kw(Kw::Replication) {
            let n = self.parse_int_in(1, i64::from(i32::MAX))?;
            spec.replication = u32::try_from(n).ok();
        }
        if self.eat_kw(Kw::Shard) {
            self.expect_kw(Kw::Duration)?;
            spec.shard_duration = Some(self.parse_policy_duration()?);
        }
        if self.eat_kw(Kw::Name) {
            spec.name = Some(self.parse_ident()?);
        }
        Ok(CreateDatabase {
            name,
            retention_policy: Some(spec),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::{Measurement, MeasurementName, Regex};
    use crate::Duration;

    fn one(q: &str) -> Statement {
        match crate::parse(q) {
            Ok(mut s) if s.len() == 1 => s.remove(0),
            other => panic!("{q}: {other:?}"),
        }
    }

    fn err(q: &str) -> String {
        match crate::parse(q) {
            Ok(s) => panic!("{q} parsed as {s:?}"),
            Err(e) => e.to_string(),
        }
    }

    fn m(name: &str) -> Measurement {
        Measurement {
            database: None,
            retention_policy: None,
            name: MeasurementName::Name(name.into()),
        }
    }

    #[test]
    fn measurements() {
        let Statement::ShowMeasurements(s) = one(
            "SHOW MEASUREMENTS ON db WITH MEASUREMENT =~ /(?i)cp/ WHERE a = 'b' LIMIT 100 OFFSET 5",
        ) else {
            panic!()
        };
        assert_eq!(s.database.as_deref(), Some("db"));
        let re = MeasurementName::Regex(Regex("(?i)cp".into()));
        assert_eq!(s.with_measurement.map(|m| m.name), Some(re));
        assert!(s.condition.is_some());
        assert_eq!((s.limit, s.offset), (Some(100), Some(5)));
        assert_eq!(
            err("SHOW MEASUREMENTS WITH MEASUREMENT > x"),
            "found >, expected =, =~ at line 1, char 36"
        );
    }

    #[test]
    fn tag_values_keys() {
        let key = |q: &str| match one(&format!("SHOW TAG VALUES WITH KEY {q}")) {
            Statement::ShowTagValues(s) => s.key,
            other => panic!("{other:?}"),
        };
        assert_eq!(key(r#"= "host""#), TagKeyFilter::Eq("host".into()));
        assert_eq!(key("!= host"), TagKeyFilter::NotEq("host".into()));
        assert_eq!(
            key(r#"IN ("a", "b")"#),
            TagKeyFilter::In(vec!["a".into(), "b".into()])
        );
        assert_eq!(key("=~ /^h/"), TagKeyFilter::Regex(Regex("^h".into())));
        assert_eq!(key("!~ /^h/"), TagKeyFilter::NotRegex(Regex("^h".into())));
        assert_eq!(
            err("SHOW TAG VALUES"),
            "found EOF, expected WITH at line 1, char 17"
        );
        assert_eq!(
            err("SHOW TAG VALUES WITH KEY > x"),
            "found >, expected IN, =, =~ at line 1, char 26"
        );
        assert_eq!(
            err("SHOW TAG VALUES WITH KEY = 'x'"),
            "found x, expected identifier at line 1, char 27"
        );
    }

    #[test]
    fn series_and_cardinality() {
        let Statement::ShowSeries(s) = one("SHOW SERIES ON db FROM cpu WHERE host = 'a' LIMIT 1")
        else {
            panic!()
        };
        assert_eq!(
            (s.database.as_deref(), s.sources, s.limit),
            (Some("db"), vec![m("cpu")], Some(1))
        );
        let Statement::ShowCardinality(c) = one("SHOW SERIES EXACT CARDINALITY ON db") else {
            panic!()
        };
        assert!(c.exact && c.of == CardinalityOf::Series);
        let Statement::ShowCardinality(c) =
            one("SHOW MEASUREMENT CARDINALITY FROM cpu WHERE a = 'b' GROUP BY host")
        else {
            panic!()
        };
        assert!(!c.exact && c.of == CardinalityOf::Measurements);
        assert_eq!(c.group_by.len(), 1);
        assert!(
            matches!(one("SHOW MEASUREMENT EXACT CARDINALITY"), Statement::ShowCardinality(c) if c.exact)
        );
        let Statement::ShowCardinality(c) =
            one("SHOW TAG VALUES EXACT CARDINALITY ON db FROM cpu WITH KEY IN (a, b) WHERE x = 'y' GROUP BY z LIMIT 2")
        else {
            panic!()
        };
        assert_eq!(
            (c.exact, c.of, c.database.as_deref(), c.limit),
            (
                true,
                CardinalityOf::TagValues(TagKeyFilter::In(vec!["a".into(), "b".into()])),
                Some("db"),
                Some(2)
            )
        );
        assert!(c.condition.is_some() && c.group_by.len() == 1);
        for (q, of, exact) in [
            (
                "SHOW TAG KEY CARDINALITY FROM cpu",
                CardinalityOf::TagKeys,
                false,
            ),
            (
                "SHOW TAG KEY EXACT CARDINALITY",
                CardinalityOf::TagKeys,
                true,
            ),
            (
                "SHOW FIELD KEY CARDINALITY ON db",
                CardinalityOf::FieldKeys,
                false,
            ),
            (
                "SHOW FIELD KEY EXACT CARDINALITY",
                CardinalityOf::FieldKeys,
                true,
            ),
        ] {
            assert!(
                matches!(one(q), Statement::ShowCardinality(c) if c.of == of && c.exact == exact),
                "{q}"
            );
        }
        // InfluxDB 1.8's words.
        for (q, e) in [
            (
                "SHOW TAG KEY foo",
                "found foo, expected EXACT, CARDINALITY at line 1, char 14",
            ),
            (
                "SHOW TAG KEY EXACT foo",
                "found foo, expected CARDINALITY at line 1, char 20",
            ),
            (
                "SHOW FIELD KEY foo",
                "found foo, expected EXACT, CARDINALITY at line 1, char 16",
            ),
            (
                "SHOW TAG VALUES EXACT foo",
                "found foo, expected CARDINALITY at line 1, char 23",
            ),
            (
                "SHOW TAG VALUES CARDINALITY FROM cpu",
                "found EOF, expected WITH at line 1, char 38",
            ),
        ] {
            assert_eq!(err(q), e, "{q}");
        }
        assert!(matches!(one("SHOW SERIES EXACT"), Statement::ShowSeries(_)));
        assert_eq!(
            err("SHOW MEASUREMENT EXACT"),
            "found EOF, expected CARDINALITY at line 1, char 24"
        );
    }

    #[test]
    fn create_database() {
        let db = |q: &str| match one(q) {
            Statement::CreateDatabase(c) => c,
            other => panic!("{other:?}"),
        };
        assert_eq!(db("CREATE DATABASE \"tele graf\"").retention_policy, None);
        let c = db("CREATE DATABASE t WITH DURATION 7d REPLICATION 1 SHARD DURATION 1h NAME raw");
        let day = 86_400 * 1_000_000_000;
        assert_eq!(
            c.retention_policy,
            Some(RetentionPolicySpec {
                duration: Some(Duration(7 * day)),
                replication: Some(1),
                shard_duration: Some(Duration(day / 24)),
                name: Some("raw".into()),
            })
        );
        let c = db("create database x with duration inf");
        assert_eq!(
            c.retention_policy.and_then(|p| p.duration),
            Some(Duration(0))
        );
        for (q, e) in [
            (
                "CREATE DATABASE",
                "found EOF, expected identifier at line 1, char 17",
            ),
            (
                r#"CREATE DATABASE "testdb" WITH"#,
                "found EOF, expected DURATION, NAME, REPLICATION, SHARD at line 1, char 31",
            ),
            (
                r#"CREATE DATABASE "testdb" WITH DURATION"#,
                "found EOF, expected duration at line 1, char 40",
            ),
            (
                r#"CREATE DATABASE "testdb" WITH REPLICATION"#,
                "found EOF, expected integer at line 1, char 43",
            ),
            (
                r#"CREATE DATABASE "testdb" WITH NAME"#,
                "found EOF, expected identifier at line 1, char 36",
            ),
            (
                r#"CREATE DATABASE "testdb" WITH SHARD"#,
                "found EOF, expected DURATION at line 1, char 37",
            ),
            (
                "CREATE DATABASE x WITH REPLICATION 0",
                "invalid value 0: must be 1 <= n <= 2147483647 at line 1, char 36",
            ),
            (
                "CREATE DATABASE x WITH DURATION 15251w",
                "overflowed duration 15251w: choose a smaller duration or INF at line 1, char 33",
            ),
            (
                "CREATE DATABASE x WITH BOGUS 1",
                "found BOGUS, expected DURATION, NAME, REPLICATION, SHARD at line 1, char 24",
            ),
            (
                "CREATE DATABASE x WITH NAME rp DURATION 1d",
                "found DURATION, expected ; at line 1, char 32",
            ),
        ] {
            assert_eq!(err(q), e, "{q}");
        }
    }
}
