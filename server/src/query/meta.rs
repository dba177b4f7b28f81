//! `SHOW MEASUREMENTS`, `TAG KEYS`, `TAG VALUES`, `FIELD KEYS`, `SERIES` and the cardinalities:
//! questions about the series table (a row per series and database, with its tags) and the
//! catalog's field types, answered in InfluxDB's column layouts (Grafana reads them by
//! position: `["name"]`, `["tagKey"]`, `["key","value"]`, `["fieldKey","fieldType"]`).

use serde_json::Value;
use sluice_core::names::{quote_ident, quote_str};
use sluice_core::FieldType;
use sluice_influxql::{Expr, Measurement, MeasurementName, SortOrder, TagKeyFilter};

use super::cond::{self, Scope};
use super::PlanError;
use crate::catalog::SERIES_TABLE;

/// The series of `db` that the sources and the condition select, as SQL conditions on the
/// series table. Conditions on time are ignored (every series the database has is listed, a
/// deliberate difference from InfluxDB, which looks at the shards of the range); conditions
/// on fields are refused, as InfluxDB refuses them.
pub fn series_filter(
    db: &str,
    sources: &[Measurement],
    condition: Option<&Expr>,
    now_ns: i64,
) -> Result<String, PlanError> {
    let mut conds = vec![format!("db = {}", quote_str(db))];
    if !sources.is_empty() {
        let any: Vec<String> = sources.iter().map(measurement_sql).collect();
        conds.push(format!("({})", any.join(" OR ")));
    }
    let no_fields = Default::default();
    let scope = Scope {
        fields: &no_fields,
        now_ns,
    };
    let w = cond::split(condition, &scope)?;
    if !w.rows.is_empty() {
        return Err(PlanError::Invalid(
            "a SHOW statement's WHERE can only compare tags".into(),
        ));
    }
    conds.extend(w.series);
    Ok(conds.join(" AND "))
}

fn measurement_sql(m: &Measurement) -> String {
    match &m.name {
        MeasurementName::Name(n) => format!("measurement = {}", quote_str(n)),
        MeasurementName::Regex(re) => format!("match(measurement, {})", quote_str(re.as_str())),
    }
}

fn limit_sql(limit: Option<u64>, offset: Option<u64>) -> String {
    match (limit, offset) {
        (None, None) => String::new(),
        (l, o) => format!(
            " LIMIT {}, {}",
            o.unwrap_or(0),
            l.unwrap_or(i64::MAX as u64)
        ),
    }
}

fn dir(order: Option<SortOrder>) -> &'static str {
    if order == Some(SortOrder::Descending) {
        " DESC"
    } else {
        ""
    }
}

/// This pod's series table. `merged`: one row per series (`FINAL`), for a statement that
/// lists or counts series; the others take each distinct name, key or value once whatever
/// the rows, and read the table as it is: `FINAL` merges every row of the database before
/// the statement's condition applies, and over 500,000 series the values of `region` took
/// 133-139 ms with it against 62-64 ms without (bench/README, "the series lookup at many
/// series").
pub fn local_series(merged: bool) -> String {
    if merged {
        format!("{} FINAL", quote_ident(SERIES_TABLE))
    } else {
        quote_ident(SERIES_TABLE)
    }
}

/// The peers' series as one table (a series written through several pods is in each).
pub fn gathered_series(url: &str) -> String {
    format!("(SELECT DISTINCT db, measurement, tags FROM {url})")
}

/// The columns of a pod's series, as it sends them.
pub const SERIES_STRUCTURE: &str = "db String, measurement String, tags Map(String, String)";

/// How far a pod may cut its series for a statement that lists less than series: the
/// gathering pod's `DISTINCT` and `filter` give the same answer over one row per group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnePer {
    /// `SHOW MEASUREMENTS` (Grafana's health check), `SHOW MEASUREMENT CARDINALITY`.
    Measurement,
    /// `SHOW TAG KEYS`, and a `SELECT`'s look-up of a measurement's tag keys.
    KeySet,
}

/// A pod's series that `filter` selects, for a gathering pod; with `one_per`, one series per
/// group (ten thousand hosts' series are a few rows for `SHOW TAG KEYS`, not 400 KB).
pub fn partial_series_sql(filter: &str, one_per: Option<OnePer>) -> String {
    let by = match one_per {
        None => "",
        Some(OnePer::Measurement) => " LIMIT 1 BY db, measurement",
        Some(OnePer::KeySet) => " LIMIT 1 BY db, measurement, arraySort(mapKeys(tags))",
    };
    format!(
        "SELECT db, measurement, tags FROM {} WHERE {filter}{by}",
        local_series(false)
    )
}

pub fn measurements_sql(
    from: &str,
    filter: &str,
    order: Option<SortOrder>,
    limit: Option<u64>,
    offset: Option<u64>,
) -> String {
    format!(
        "SELECT DISTINCT measurement FROM {} WHERE {filter} ORDER BY measurement{}{}",
        from,
        dir(order),
        limit_sql(limit, offset)
    )
}

pub fn tag_keys_sql(from: &str, filter: &str) -> String {
    format!(
        "SELECT measurement, arraySort(groupUniqArrayArray(mapKeys(tags))) FROM {} WHERE {filter} GROUP BY measurement ORDER BY measurement",
        from
    )
}

/// The `(measurement, k, v)` rows of `SHOW TAG VALUES` over series `from`: one per series
/// and listed key (so not yet distinct).
pub fn tag_value_rows_sql(from: &str, filter: &str, key: &TagKeyFilter) -> String {
    let k = match key {
        // One key: its values straight from the map, without a row per key of every series
        // first (the values of `host` over 10,000 series: 6.7 -> 5.3 ms in the engine).
        TagKeyFilter::Eq(k) => {
            let k = quote_str(k);
            return format!(
                "SELECT measurement, {k} AS k, tags[{k}] AS v FROM {from} WHERE {filter} AND mapContains(tags, {k})"
            );
        }
        other => key_filter_sql(other),
    };
    format!(
        "SELECT measurement, k, tags[k] AS v FROM {from} ARRAY JOIN mapKeys(tags) AS k WHERE {filter} AND {k}"
    )
}

/// `WITH KEY ...` as a condition on a series' tag key `k`.
pub fn key_filter_sql(key: &TagKeyFilter) -> String {
    match key {
        TagKeyFilter::Eq(k) => format!("k = {}", quote_str(k)),
        TagKeyFilter::NotEq(k) => format!("k != {}", quote_str(k)),
        TagKeyFilter::In(ks) => format!(
            "k IN ({})",
            ks.iter()
                .map(|k| quote_str(k))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        TagKeyFilter::Regex(re) => format!("match(k, {})", quote_str(re.as_str())),
        TagKeyFilter::NotRegex(re) => format!("NOT match(k, {})", quote_str(re.as_str())),
    }
}

/// A pod's distinct tag values for a gathering pod: three short strings per value, not every
/// series' whole tag map (the values of `host` over 10,000 series on each of three pods:
/// 23.6 -> 14.3 ms for the gathering pod's engine).
pub fn distinct_tag_values_sql(rows: &str) -> String {
    format!("SELECT DISTINCT measurement, k, v FROM ({rows})")
}

/// The columns of a pod's distinct tag values, as it sends them.
pub const TAG_VALUES_STRUCTURE: &str = "measurement String, k String, v String";

/// `SHOW TAG VALUES`' answer from this pod's series (`from`) alone.
pub fn tag_values_sql(
    from: &str,
    filter: &str,
    key: &TagKeyFilter,
    order: Option<SortOrder>,
) -> String {
    format!(
        "{}{}",
        tag_value_rows_sql(from, filter, key),
        grouped_tag_values(key, order)
    )
}

/// `SHOW TAG VALUES`' answer from every pod's [`distinct_tag_values_sql`] as one table.
pub fn gathered_tag_values_sql(url: &str, key: &TagKeyFilter, order: Option<SortOrder>) -> String {
    let k = match key {
        TagKeyFilter::Eq(k) => format!("{} AS k", quote_str(k)),
        _ => "k".to_string(),
    };
    format!(
        "SELECT measurement, {k}, v FROM {url}{}",
        grouped_tag_values(key, order)
    )
}

/// One row per value, in order. With one key the key is a constant, left out of the grouping
/// (grouping by it too took 8.2 -> 10.1 ms for the values of `host` over 10,000 series).
fn grouped_tag_values(key: &TagKeyFilter, order: Option<SortOrder>) -> String {
    let by = match key {
        TagKeyFilter::Eq(_) => "measurement, v",
        _ => "measurement, k, v",
    };
    format!(" GROUP BY {by} ORDER BY {by}{}", dir(order))
}

pub fn series_sql(from: &str, filter: &str) -> String {
    format!(
        "SELECT measurement, toJSONString(mapSort(tags)) FROM {} WHERE {filter}",
        from
    )
}

/// A series of the answer without tags.
pub fn series(name: Option<&str>, columns: &[&str], values: Vec<Value>) -> Value {
    let columns = Value::Array(columns.iter().map(|c| Value::from(*c)).collect());
    match name {
        Some(n) => super::answer::object([
            ("name", Value::from(n)),
            ("columns", columns),
            ("values", Value::Array(values)),
        ]),
        None => super::answer::object([("columns", columns), ("values", Value::Array(values))]),
    }
}

/// Applies `LIMIT`/`OFFSET` to one series' values, as InfluxDB does per measurement.
pub fn page(values: Vec<Value>, limit: Option<u64>, offset: Option<u64>) -> Vec<Value> {
    values
        .into_iter()
        .skip(offset.unwrap_or(0) as usize)
        .take(limit.map_or(usize::MAX, |l| l as usize))
        .collect()
}

/// A series key as InfluxDB prints it: `cpu,dc=x,host=a`, with `,`, `=` and spaces escaped.
pub fn series_key(measurement: &str, tags: &serde_json::Map<String, Value>) -> String {
    let esc = |s: &str, measurement: bool| {
        let mut out = String::with_capacity(s.len());
        for c in s.chars() {
            if c == ',' || c == ' ' || (!measurement && c == '=') {
                out.push('\\');
            }
            out.push(c);
        }
        out
    };
    let mut key = esc(measurement, true);
    for (k, v) in tags {
        key.push(',');
        key.push_str(&esc(k, false));
        key.push('=');
        key.push_str(&esc(v.as_str().unwrap_or_default(), false));
    }
    key
}

/// InfluxDB's name of a field type.
pub fn field_type_name(t: FieldType) -> &'static str {
    match t {
        FieldType::Float => "float",
        FieldType::Integer => "integer",
        FieldType::UInteger => "unsigned",
        FieldType::String => "string",
        FieldType::Boolean => "boolean",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_select_series_by_measurement_and_tags() {
        let m = |name: MeasurementName| Measurement {
            database: None,
            retention_policy: None,
            name,
        };
        let cond = sluice_influxql::parse_expr("host = 'a' AND time > now() - 1h").unwrap();
        let f = series_filter(
            "db",
            &[
                m(MeasurementName::Name("cpu".into())),
                m(MeasurementName::Regex(sluice_influxql::Regex("^m".into()))),
            ],
            Some(&cond),
            0,
        )
        .unwrap();
        assert_eq!(
            f,
            "db = 'db' AND (measurement = 'cpu' OR match(measurement, '^m')) AND (tags['host'] = 'a')"
        );
        let bad = sluice_influxql::parse_expr("host = 'a' AND value > 1").unwrap();
        // With no fields known every name is a tag: a comparison with a number matches nothing.
        assert!(series_filter("db", &[], Some(&bad), 0).is_ok());
    }

    /// The time only decides whether a `SHOW`'s condition is an error, never which series it
    /// selects: pods' shares and the gathering pod's answer are kept without it
    /// ([`crate::cluster::Partial::timeless`]).
    #[test]
    fn the_time_does_not_change_which_series_are_listed() {
        let filter = |cond: &str, now: i64| {
            let cond = sluice_influxql::parse_expr(cond).unwrap();
            series_filter("db", &[], Some(&cond), now)
        };
        let cond = "host = 'a' AND time > now() - 1h AND time < '2026-11-29T22:00:00Z'";
        let early = filter(cond, 1_700_000_000_000_000_000).unwrap();
        assert_eq!(early, "db = 'db' AND (tags['host'] = 'a')");
        // Past the range's end, the range is empty: an error, whatever it listed before.
        assert!(filter(cond, 1_900_000_000_000_000_000).is_err());
        let open = "host = 'a' AND time > now() - 1h";
        assert_eq!(
            filter(open, 0).unwrap(),
            filter(open, i64::MAX / 2).unwrap()
        );
    }

    /// A pod sends one series per group only where the gathering pod asks no more of them.
    #[test]
    fn pods_cut_their_series_only_to_what_the_statement_lists() {
        let all = partial_series_sql("db = 'db'", None);
        assert!(!all.contains("LIMIT"), "{all}");
        let m = partial_series_sql("db = 'db'", Some(OnePer::Measurement));
        assert!(
            m.ends_with("WHERE db = 'db' LIMIT 1 BY db, measurement"),
            "{m}"
        );
        let k = partial_series_sql("db = 'db'", Some(OnePer::KeySet));
        assert!(
            k.ends_with("LIMIT 1 BY db, measurement, arraySort(mapKeys(tags))"),
            "{k}"
        );
    }

    #[test]
    fn pods_send_tag_values_not_tag_maps() {
        let one = TagKeyFilter::Eq("host".into());
        let share = distinct_tag_values_sql(&tag_value_rows_sql("s", "db = 'db'", &one));
        assert!(share.starts_with("SELECT DISTINCT measurement, k, v FROM (SELECT measurement, 'host' AS k, tags['host'] AS v FROM s WHERE db = 'db' AND mapContains(tags, 'host'))"), "{share}");
        let gathered = gathered_tag_values_sql("u", &one, None);
        assert_eq!(gathered, "SELECT measurement, 'host' AS k, v FROM u GROUP BY measurement, v ORDER BY measurement, v");
        let some = TagKeyFilter::In(vec!["dc".into(), "host".into()]);
        let gathered = gathered_tag_values_sql("u", &some, Some(SortOrder::Descending));
        assert!(
            gathered.ends_with("GROUP BY measurement, k, v ORDER BY measurement, k, v DESC"),
            "{gathered}"
        );
    }

    #[test]
    fn series_keys_escape_like_line_protocol() {
        let tags = serde_json::json!({"dc": "eu west", "host": "a=b,c"});
        assert_eq!(
            series_key("c p,u", tags.as_object().unwrap()),
            "c\\ p\\,u,dc=eu\\ west,host=a\\=b\\,c"
        );
    }

    #[test]
    fn paging_is_per_series() {
        let v: Vec<Value> = (0..5).map(Value::from).collect();
        assert_eq!(page(v, Some(2), Some(1)), [Value::from(1), Value::from(2)]);
    }
}
