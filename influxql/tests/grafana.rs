//! Every query shape Grafana's InfluxDB (InfluxQL) data source sends: the backend query
//! builder (after `$timeFilter`, `$__interval` and `$__interval_ms` are replaced), the
//! frontend metadata queries behind the editor's drop-downs and template variables, and the
//! health check.

use sluice_influxql::*;

const S: i64 = 1_000_000_000;
const MS: i64 = 1_000_000;

fn parse_one(q: &str) -> Statement {
    match parse(q) {
        Ok(mut stmts) if stmts.len() == 1 => stmts.remove(0),
        other => panic!("{q}: {other:?}"),
    }
}

fn select(q: &str) -> SelectStatement {
    match parse_one(q) {
        Statement::Select(s) => *s,
        other => panic!("{q}: not a SELECT: {other:?}"),
    }
}

fn var(name: &str) -> Expr {
    Expr::VarRef {
        name: name.into(),
        data_type: None,
    }
}

fn call(name: &str, args: Vec<Expr>) -> Expr {
    Expr::Call {
        name: name.into(),
        args,
    }
}

fn lit(l: Literal) -> Expr {
    Expr::Literal(l)
}

fn bin(lhs: Expr, op: BinaryOp, rhs: Expr) -> Expr {
    Expr::Binary {
        lhs: Box::new(lhs),
        op,
        rhs: Box::new(rhs),
    }
}

fn string(s: &str) -> Expr {
    lit(Literal::String(s.into()))
}

fn ms(v: i64) -> Expr {
    lit(Literal::Duration(Duration(v * MS)))
}

fn measurement(rp: Option<&str>, name: &str) -> Source {
    Source::Measurement(Measurement {
        database: None,
        retention_policy: rp.map(String::from),
        name: MeasurementName::Name(name.into()),
    })
}

/// `time >= 1596240000000ms and time <= 1596240300000ms`, Grafana's rendered `$timeFilter`.
fn time_filter() -> Expr {
    bin(
        bin(var("time"), BinaryOp::GtEq, ms(1_596_240_000_000)),
        BinaryOp::And,
        bin(var("time"), BinaryOp::LtEq, ms(1_596_240_300_000)),
    )
}

const TIME_FILTER: &str = "time >= 1596240000000ms and time <= 1596240300000ms";

#[test]
fn simple_query_with_policy() {
    let s = select(&format!(
        r#"SELECT mean("value") FROM "policy"."cpu" WHERE {TIME_FILTER} GROUP BY time(10s) fill(null)"#
    ));
    assert_eq!(
        s,
        SelectStatement {
            fields: vec![Field {
                expr: call("mean", vec![var("value")]),
                alias: None
            }],
            sources: vec![measurement(Some("policy"), "cpu")],
            condition: Some(time_filter()),
            group_by: vec![Dimension::Time {
                interval: Duration(10 * S),
                offset: None
            }],
            fill: Some(Fill::Null),
            order: None,
            limit: None,
            offset: None,
            slimit: None,
            soffset: None,
            timezone: None,
        }
    );
    assert_eq!(s.column_names(), ["time", "mean"]);
}

#[test]
fn tags_grouping_and_fill_none() {
    let s = select(&format!(
        r#"SELECT mean("value") FROM "cpu" WHERE ("hostname" = 'server1' OR "hostname" = 'server2') AND {TIME_FILTER} GROUP BY time(10s), "datacenter" fill(none)"#
    ));
    let hosts = Expr::Paren(Box::new(bin(
        bin(var("hostname"), BinaryOp::Eq, string("server1")),
        BinaryOp::Or,
        bin(var("hostname"), BinaryOp::Eq, string("server2")),
    )));
    let expected = bin(
        bin(hosts, BinaryOp::And, time_filter_lhs()),
        BinaryOp::And,
        bin(var("time"), BinaryOp::LtEq, ms(1_596_240_300_000)),
    );
    assert_eq!(s.condition, Some(expected));
    assert_eq!(s.group_by_tags(), ["datacenter"]);
    assert_eq!(s.group_by_time(), Some((Duration(10 * S), None)));
    assert_eq!(s.fill, Some(Fill::None));
}

/// `AND` is left-associative: `(tags) AND time >= a and time <= b` groups as
/// `((tags AND time >= a) AND time <= b)`.
fn time_filter_lhs() -> Expr {
    bin(var("time"), BinaryOp::GtEq, ms(1_596_240_000_000))
}

#[test]
fn relative_time_order_limits_and_tz() {
    let s = select(
        r#"SELECT "value" FROM "cpu" WHERE time >= now() - 6h and time <= now() ORDER BY time ASC limit 1 slimit 1 tz('Europe/Paris')"#,
    );
    let now = || call("now", vec![]);
    let six_hours = lit(Literal::Duration(Duration(6 * 3600 * S)));
    assert_eq!(
        s.condition,
        Some(bin(
            bin(
                var("time"),
                BinaryOp::GtEq,
                bin(now(), BinaryOp::Sub, six_hours)
            ),
            BinaryOp::And,
            bin(var("time"), BinaryOp::LtEq, now()),
        ))
    );
    assert_eq!(s.order, Some(SortOrder::Ascending));
    assert_eq!((s.limit, s.slimit), (Some(1), Some(1)));
    assert_eq!(s.timezone.as_deref(), Some("Europe/Paris"));
    assert_eq!(s.column_names(), ["time", "value"]);

    let s = select(&format!(
        r#"SELECT mean("value") FROM "cpu" WHERE {TIME_FILTER} GROUP BY time(5s) ORDER BY time ASC limit 1 slimit 1 tz('Europe/Paris')"#
    ));
    assert_eq!(s.timezone.as_deref(), Some("Europe/Paris"));
    let s = select(&format!(
        r#"SELECT mean("value") FROM "cpu" WHERE {TIME_FILTER} GROUP BY time(5s) tz('Europe/Paris')"#
    ));
    assert_eq!(s.timezone.as_deref(), Some("Europe/Paris"));
    let s =
        select(r#"SELECT "value" FROM "cpu" WHERE time > now() - 1h ORDER BY time DESC LIMIT 10"#);
    assert_eq!(s.order, Some(SortOrder::Descending));
}

#[test]
fn math_and_alias() {
    let s = select(&format!(
        r#"SELECT mean("value") / 100 FROM "cpu" WHERE {TIME_FILTER}"#
    ));
    let mean = call("mean", vec![var("value")]);
    assert_eq!(
        s.fields[0].expr,
        bin(mean.clone(), BinaryOp::Div, lit(Literal::Integer(100)))
    );
    assert_eq!(s.fields[0].column_name(), "mean");
    assert_eq!(s.fields[0].expr.to_string(), "mean(value) / 100");

    // `$__interval_ms` becomes an integer.
    let s = select(&format!(
        r#"SELECT mean("value") / 5000 FROM "cpu" WHERE {TIME_FILTER}"#
    ));
    assert_eq!(s.fields[0].column_name(), "mean");

    let s = select(
        r#"SELECT mean("value") /100 AS "text" FROM "autogen"."cpu" WHERE time >= now() - 6h GROUP BY time(1m) fill(null)"#,
    );
    assert_eq!(s.fields[0].alias.as_deref(), Some("text"));
    assert_eq!(s.column_names(), ["time", "text"]);

    let s =
        select(r#"SELECT mean("value") *2 AS "double", max("value") - min("value") FROM "cpu""#);
    assert_eq!(s.column_names(), ["time", "double", "max_min"]);
}

#[test]
fn old_interval_variable_and_millisecond_groups() {
    let s = select(&format!(
        r#"SELECT mean("value") FROM "cpu" WHERE {TIME_FILTER} GROUP BY time(200ms)"#
    ));
    assert_eq!(s.group_by_time(), Some((Duration(200 * MS), None)));
    let s =
        select(r#"SELECT mean("value") FROM "cpu" WHERE time > now() - 1h GROUP BY time(1m, 30s)"#);
    let offset = Some(TimeOffset::Duration(Duration(30 * S)));
    assert_eq!(s.group_by_time(), Some((Duration(60 * S), offset)));
}

#[test]
fn tag_condition_forms() {
    let cond = |c: &str| {
        select(&format!(
            r#"SELECT mean("value") FROM "autogen"."cpu" WHERE ({c}) AND {TIME_FILTER}"#
        ))
        .condition
        .map(|e| e.to_string())
    };
    let q = |c: &str| Some(format!("({c}) AND {}", time_filter()));
    assert_eq!(cond(r#""key" = 'value'"#), q("\"key\" = 'value'"));
    assert_eq!(cond(r#""key" =~ /value/"#), q("\"key\" =~ /value/"));
    assert_eq!(cond(r#""key" = '10001'"#), q("\"key\" = '10001'"));
    assert_eq!(cond(r#""key" < 10001"#), q("\"key\" < 10001"));
    assert_eq!(cond(r#""key" > 10001"#), q("\"key\" > 10001"));
    assert_eq!(cond(r#""key" >= 10001"#), q("\"key\" >= 10001"));
    assert_eq!(cond(r#""key" <= 10001"#), q("\"key\" <= 10001"));
    assert_eq!(cond(r#""key" = false"#), q("\"key\" = false"));
    assert_eq!(cond(r#""key" != true"#), q("\"key\" != true"));
    assert_eq!(cond(r#""key" = 'A string'"#), q("\"key\" = 'A string'"));
    assert_eq!(cond(r#""key" = 123"#), q("\"key\" = 123"));
    assert_eq!(cond(r#""key" = -123"#), q("\"key\" = -123"));
    assert_eq!(cond(r#""key" = 1.23"#), q("\"key\" = 1.23"));
    assert_eq!(cond(r#""key" = -1.23"#), q("\"key\" = -1.23"));
    assert_eq!(cond(r#""key" > '12.2'"#), q("\"key\" > '12.2'"));
    assert_eq!(
        cond(r#""key" = 'C:\\test\\'"#),
        q(r#""key" = 'C:\\test\\'"#)
    );
    assert_eq!(
        cond(r#""hostname" = 'server\\1'"#),
        q(r"hostname = 'server\\1'")
    );
    assert_eq!(
        cond(r#""name" = 'Let\'s encrypt.' OR "hostname" = 'server2'"#),
        q(r#""name" = 'Let\'s encrypt.' OR hostname = 'server2'"#)
    );
    assert_eq!(cond(r#""app" =~ /e.*/"#), q("app =~ /e.*/"));
    assert_eq!(
        cond(r#""value" =~ /^(server1|server2)$/"#),
        q("value =~ /^(server1|server2)$/")
    );
    assert_eq!(
        cond(r#""value" !~ /^(a\.b|c)$/"#),
        q(r"value !~ /^(a\.b|c)$/")
    );
    assert_eq!(
        cond(r#""host"::tag = 'a' AND "v"::field > 1"#),
        q("host::tag = 'a' AND v::field > 1")
    );
    assert_eq!(
        cond(r#""hostname" = 'server1' AND "app" = 'email'"#),
        q("hostname = 'server1' AND app = 'email'")
    );

    let s = select(r#"SELECT mean("value") FROM "cpu" WHERE "key" = 'C:\\test\\'"#);
    assert_eq!(
        s.condition,
        Some(bin(var("key"), BinaryOp::Eq, string(r"C:\test\")))
    );
}

#[test]
fn measurements_and_regex_sources() {
    let sources = |from: &str| {
        select(&format!(
            "SELECT mean(\"value\") FROM {from} WHERE {TIME_FILTER}"
        ))
        .sources
    };
    assert_eq!(
        sources(r#""policy"."apa""#),
        vec![measurement(Some("policy"), "apa")]
    );
    assert_eq!(
        sources(r#""5m_avg"."cpu""#),
        vec![measurement(Some("5m_avg"), "cpu")]
    );
    let regex = |rp: Option<&str>, re: &str| {
        Source::Measurement(Measurement {
            database: None,
            retention_policy: rp.map(String::from),
            name: MeasurementName::Regex(Regex(re.into())),
        })
    };
    assert_eq!(
        sources(r#""policy"./apa/"#),
        vec![regex(Some("policy"), "apa")]
    );
    assert_eq!(sources("/^cpu|mem$/"), vec![regex(None, "^cpu|mem$")]);
    assert_eq!(sources(r#""db"."rp"."m""#).len(), 1);
    assert_eq!(sources("telegraf..cpu, mem").len(), 2);
}

#[test]
fn raw_queries_with_adhoc_filters() {
    let s = select(r#"SELECT "gauge" FROM "a"."b" WHERE time >= 123456780 and time <= 123456789"#);
    assert_eq!(
        s.condition.map(|c| c.to_string()),
        Some("time >= 123456780 AND time <= 123456789".into())
    );
    let s = select(r#"SELECT "gauge" as "世界" FROM "a"."b" WHERE "lol" = 'sob'"#);
    assert_eq!(s.column_names(), ["time", "世界"]);
    let s = select(
        r#"SELECT "gauge" as "where is my thing" FROM "a"."b" WHERE "lol" = 'sob' AND time >= 123456780 AND time <= 123456789"#,
    );
    assert_eq!(s.fields[0].alias.as_deref(), Some("where is my thing"));
    select(r#"SELECT "gauge" FROM "a"."b" WHERE "lol" = 'sob' AND "lol" = 'sob'"#);
}

#[test]
fn every_select_part() {
    for (field, name) in [
        (r#"count("value")"#, "count"),
        (r#"distinct("value")"#, "distinct"),
        (r#"count(distinct("value"))"#, "count"),
        (r#"count(distinct "value")"#, "count"),
        (r#"integral("value")"#, "integral"),
        (r#"mean("value")"#, "mean"),
        (r#"median("value")"#, "median"),
        (r#"mode("value")"#, "mode"),
        (r#"sum("value")"#, "sum"),
        (r#"spread("value")"#, "spread"),
        (r#"stddev("value")"#, "stddev"),
        (r#"first("value")"#, "first"),
        (r#"last("value")"#, "last"),
        (r#"max("value")"#, "max"),
        (r#"min("value")"#, "min"),
        (r#"percentile("value", 95)"#, "percentile"),
        (r#"top("value", 3)"#, "top"),
        (r#"bottom("value", 3)"#, "bottom"),
        (r#"derivative(mean("value"), 10s)"#, "derivative"),
        (r#"derivative(mean("value"))"#, "derivative"),
        (
            r#"non_negative_derivative(mean("value"), 1s)"#,
            "non_negative_derivative",
        ),
        (r#"difference(mean("value"))"#, "difference"),
        (
            r#"non_negative_difference(mean("value"))"#,
            "non_negative_difference",
        ),
        (r#"moving_average(mean("value"), 10)"#, "moving_average"),
        (r#"cumulative_sum(mean("value"))"#, "cumulative_sum"),
        (r#"elapsed(mean("value"), 10s)"#, "elapsed"),
        (r#"elapsed("value")"#, "elapsed"),
        (r#"holt_winters(mean("value"), 10, 2)"#, "holt_winters"),
        (
            r#"holt_winters_with_fit(mean("value"), 10, 2)"#,
            "holt_winters_with_fit",
        ),
        (r#""value""#, "value"),
        (r#""host"::tag"#, "host"),
        (r#""value"::field"#, "value"),
        (r#""value"::float"#, "value"),
        (r#""value"::integer"#, "value"),
        ("mean(*)", "mean"),
        ("mean(/^cpu/)", "mean"),
    ] {
        let s = select(&format!(
            "SELECT {field} FROM \"autogen\".\"cpu\" WHERE {TIME_FILTER} GROUP BY time(10s) fill(null)"
        ));
        assert_eq!(s.fields[0].column_name(), name, "{field}");
    }
    let s = select(&format!(r#"SELECT * FROM "cpu" WHERE {TIME_FILTER}"#));
    assert_eq!(s.fields[0].expr, Expr::Wildcard(None));
    let s = select(&format!(
        r#"SELECT "value", "host"::tag FROM "cpu" WHERE {TIME_FILTER}"#
    ));
    assert_eq!(s.column_names(), ["time", "value", "host"]);
}

#[test]
fn group_by_forms() {
    let s = select(&format!(
        r#"SELECT "value" FROM "autogen"."cpu" WHERE {TIME_FILTER} GROUP BY time(10s) fill(0)"#
    ));
    assert_eq!(s.fill, Some(Fill::Integer(0)));
    let s = select(&format!(
        r#"SELECT mean("value") FROM "cpu" WHERE {TIME_FILTER} GROUP BY time(10s), "host""#
    ));
    assert_eq!(s.group_by_tags(), ["host"]);
    for fill in ["null", "none", "previous", "linear"] {
        select(&format!(
            r#"SELECT mean("value") FROM "cpu" WHERE {TIME_FILTER} GROUP BY time(10s) fill({fill})"#
        ));
    }
    let s = select(&format!(
        r#"SELECT mean("value") FROM "cpu" WHERE {TIME_FILTER} GROUP BY fill(null)"#
    ));
    assert_eq!((s.group_by, s.fill), (vec![], Some(Fill::Null)));
    let s = select(&format!(
        r#"SELECT mean("value") FROM "cpu" WHERE {TIME_FILTER} GROUP BY "host" fill(null)"#
    ));
    assert_eq!(
        (s.group_by_tags(), s.fill),
        (vec!["host"], Some(Fill::Null))
    );
    let s = select(&format!(
        r#"SELECT last("value") FROM "cpu" WHERE {TIME_FILTER} GROUP BY *"#
    ));
    assert_eq!(s.group_by, vec![Dimension::Wildcard]);
}

#[test]
fn uninterpolated_variables_fail_like_influxdb() {
    let e = parse(r#"SELECT mean("value") FROM "cpu" WHERE $timeFilter"#).unwrap_err();
    assert_eq!(e.to_string(), "missing parameter: timeFilter");
    let e = parse(
        r#"SELECT mean("value") FROM "cpu" WHERE time > now() - 1h GROUP BY time($__interval)"#,
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "missing parameter: __interval");
}

fn show(q: &str) -> Statement {
    parse_one(q)
}

fn m(rp: Option<&str>, name: &str) -> Measurement {
    Measurement {
        database: None,
        retention_policy: rp.map(String::from),
        name: MeasurementName::Name(name.into()),
    }
}

#[test]
fn health_check_and_policies() {
    assert!(matches!(
        show("SHOW measurements"),
        Statement::ShowMeasurements(_)
    ));
    assert_eq!(
        show(r#"SHOW RETENTION POLICIES on "site""#),
        Statement::ShowRetentionPolicies {
            database: Some("site".into())
        }
    );
    assert_eq!(
        show("SHOW RETENTION POLICIES"),
        Statement::ShowRetentionPolicies { database: None }
    );
    assert_eq!(show("SHOW DATABASES"), Statement::ShowDatabases);
}

#[test]
fn field_keys() {
    let keys = |q: &str| match show(q) {
        Statement::ShowFieldKeys(k) => k.sources,
        other => panic!("{other:?}"),
    };
    assert_eq!(keys("SHOW FIELD KEYS"), vec![]);
    assert_eq!(keys(r#"SHOW FIELD KEYS FROM "cpu""#), vec![m(None, "cpu")]);
    assert_eq!(
        keys(r#"SHOW FIELD KEYS FROM "rp"."test_measurement""#),
        vec![m(Some("rp"), "test_measurement")]
    );
    let re = keys("SHOW FIELD KEYS FROM /cpu.*/");
    assert_eq!(re[0].name, MeasurementName::Regex(Regex("cpu.*".into())));
}

#[test]
fn tag_keys() {
    let keys = |q: &str| match show(q) {
        Statement::ShowTagKeys(k) => k,
        other => panic!("{other:?}"),
    };
    assert_eq!(keys("SHOW TAG KEYS").sources, vec![]);
    assert_eq!(
        keys(r#"SHOW TAG KEYS FROM "cpu""#).sources,
        vec![m(None, "cpu")]
    );
    assert_eq!(
        keys(r#"SHOW TAG KEYS FROM "rp"."test_measurement""#).sources,
        vec![m(Some("rp"), "test_measurement")]
    );
    assert_eq!(keys("SHOW TAG KEYS FROM /.*/").sources.len(), 1);
    let k = keys(r#"SHOW TAG KEYS WHERE "host" = 'se1'"#);
    assert_eq!(
        k.condition,
        Some(bin(var("host"), BinaryOp::Eq, string("se1")))
    );
    let k = keys(r#"SHOW TAG KEYS FROM "rp"."m" WHERE "host" = 'a'"#);
    assert_eq!(
        (k.sources, k.condition.is_some()),
        (vec![m(Some("rp"), "m")], true)
    );
    let k = keys(r#"SHOW TAG KEYS WHERE "app" = 'lab\\el' AND "x" = 'lab\'el' AND "y" = ''"#);
    assert_eq!(
        k.condition.map(|c| c.to_string()),
        Some(r"app = 'lab\\el' AND x = 'lab\'el' AND y = ''".into())
    );
    // The builder's tests render a `==` operator; InfluxDB rejects it, and so does sluice.
    assert_eq!(
        parse(r#"SHOW TAG KEYS WHERE "app" == '42'"#)
            .unwrap_err()
            .to_string(),
        "found =, expected identifier, string, number, bool at line 1, char 28"
    );
}

#[test]
fn tag_values() {
    let values = |q: &str| match show(q) {
        Statement::ShowTagValues(v) => v,
        other => panic!("{other:?}"),
    };
    let v = values(r#"SHOW TAG VALUES WITH KEY = "app""#);
    assert_eq!((v.sources, v.key), (vec![], TagKeyFilter::Eq("app".into())));
    let v = values(r#"SHOW TAG VALUES FROM "cpu" WITH KEY = "app" WHERE "host" = 'server1'"#);
    assert_eq!(v.sources, vec![m(None, "cpu")]);
    assert_eq!(
        v.condition,
        Some(bin(var("host"), BinaryOp::Eq, string("server1")))
    );
    let v = values(
        r#"SHOW TAG VALUES FROM "one_week"."cpu" WITH KEY = "app" WHERE "host" = 'server1'"#,
    );
    assert_eq!(v.sources, vec![m(Some("one_week"), "cpu")]);
    let v = values(r#"SHOW TAG VALUES FROM "cpu" WITH KEY = "app" WHERE "host" =~ /server.*/"#);
    assert_eq!(
        v.condition.map(|c| c.to_string()),
        Some("host =~ /server.*/".into())
    );
    let v = values(
        r#"SHOW TAG VALUES FROM "m" WITH KEY = "host" WHERE "dc" = 'x' AND time > now() - 1h"#,
    );
    assert_eq!(
        v.condition.map(|c| c.to_string()),
        Some("dc = 'x' AND time > now() - 1h".into())
    );
    let v = values(r#"SHOW TAG VALUES WITH KEY IN ("region", "host")"#);
    assert_eq!(
        v.key,
        TagKeyFilter::In(vec!["region".into(), "host".into()])
    );
    let v = values(r#"SHOW TAG VALUES WITH KEY =~ /^(host|dc)$/ WHERE "region" =~ /^(us|eu)$/"#);
    assert_eq!(v.key, TagKeyFilter::Regex(Regex("^(host|dc)$".into())));
    let v = values(r#"SHOW TAG VALUES WITH KEY != "host""#);
    assert_eq!(v.key, TagKeyFilter::NotEq("host".into()));
}

#[test]
fn measurements_listing() {
    let list = |q: &str| match show(q) {
        Statement::ShowMeasurements(s) => s,
        other => panic!("{other:?}"),
    };
    let s = list("SHOW MEASUREMENTS LIMIT 100");
    assert_eq!((s.with_measurement, s.limit), (None, Some(100)));
    let s = list("SHOW MEASUREMENTS WITH MEASUREMENT =~ /(?i)something/ LIMIT 100");
    assert_eq!(
        s.with_measurement.map(|m| m.name),
        Some(MeasurementName::Regex(Regex("(?i)something".into())))
    );
    let s = list(r"SHOW MEASUREMENTS WITH MEASUREMENT =~ /(?i)abc\/edf\// LIMIT 100");
    assert_eq!(
        s.with_measurement.map(|m| m.name),
        Some(MeasurementName::Regex(Regex("(?i)abc/edf/".into())))
    );
    let s = list(
        r#"SHOW MEASUREMENTS WITH MEASUREMENT =~ /(?i)something/ WHERE "app" = 'email' LIMIT 100"#,
    );
    assert!(s.condition.is_some());
    let s = list(r#"SHOW MEASUREMENTS WHERE "app" = 'email' LIMIT 100"#);
    assert_eq!((s.condition.is_some(), s.limit), (true, Some(100)));
    let s = list(r#"SHOW MEASUREMENTS WITH MEASUREMENT = "cpu""#);
    assert_eq!(s.with_measurement, Some(m(None, "cpu")));
}

#[test]
fn several_statements_in_one_request() {
    let stmts = parse(&format!(
        "SELECT mean(\"value\") FROM \"cpu\" WHERE {TIME_FILTER} GROUP BY time(10s) fill(null);SELECT max(\"value\") FROM \"mem\" WHERE {TIME_FILTER} GROUP BY time(10s) fill(null);\n"
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(stmts.len(), 2);
}
