//! `SHOW MEASUREMENT|SERIES|TAG KEY|FIELD KEY [EXACT] CARDINALITY` and `SHOW TAG VALUES
//! [EXACT] CARDINALITY ... WITH KEY ...`, answered as InfluxDB 1.8 answers them.
//!
//! InfluxDB estimates a whole database's measurements or series (a series without a name,
//! column `cardinality estimation`) and answers everything else as the `SELECT count(...)`
//! it rewrites the statement to: a series per measurement and group of `GROUP BY` tags, each
//! of one row `count`. sluice counts exactly in both cases (an exact count is the best
//! estimate) and keeps InfluxDB's shapes.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};
use sluice_influxql::{BinaryOp, CardinalityOf, Dimension, Expr, ShowCardinality};

use super::{database, meta, show, sources_of, with_series, Ctx};
use sluice_core::names::quote_str;

/// The answer to statement `id`, `c`.
pub(super) fn cardinality(ctx: &Ctx, c: &ShowCardinality, id: usize) -> Result<Value, String> {
    if c.condition.as_ref().is_some_and(has_time) {
        return match time_refusal(&c.of) {
            Some(why) => Err(why.to_string()),
            // InfluxDB's count over its tag-value source finds nothing then.
            None => Ok(with_series(id, vec![])),
        };
    }
    if estimated(c) {
        let n = match database(ctx, c.database.as_deref()) {
            Ok(db) => count_all(ctx, c, &db, id)?,
            // InfluxDB estimates a database it does not have as empty.
            Err(e) if e.starts_with("database not found") => 0,
            Err(e) => return Err(e),
        };
        let estimate = meta::series(None, &["cardinality estimation"], vec![json!([n])]);
        return Ok(with_series(id, vec![estimate]));
    }
    let dims = tag_dimensions(&c.group_by)?;
    let db = database(ctx, c.database.as_deref())?;
    // Each group's series has one row, which any `OFFSET` skips.
    if c.offset.unwrap_or(0) > 0 {
        return Ok(with_series(id, vec![]));
    }
    let rows = show::listed(
        ctx,
        &c.database,
        &c.sources,
        c.condition.as_ref(),
        id,
        c.of == CardinalityOf::Series,
        &|from, filter| counts_sql(&c.of, from, filter, &dims),
    )?;
    // Field keys are counted per measurement from the catalog.
    let fields: Option<BTreeMap<String, u64>> = match c.of {
        CardinalityOf::FieldKeys => Some(
            sources_of(ctx, &db, ctx.req.rp, &[])?
                .into_iter()
                .map(|(m, f)| (m, f.len() as u64))
                .collect(),
        ),
        _ => None,
    };
    let mut series = Vec::new();
    for row in rows.rows {
        let Some((Value::String(measurement), rest)) = row.split_first() else {
            continue;
        };
        let (tags, count) = rest.split_at(dims.len());
        let n = match &fields {
            // A group's count is its measurement's number of fields.
            Some(fields) => fields.get(measurement).copied().unwrap_or(0),
            None => count.first().and_then(Value::as_u64).unwrap_or(0),
        };
        if n == 0 {
            continue;
        }
        series.push(group_series(&c.of, measurement, &dims, tags, n));
    }
    Ok(with_series(id, series))
}

/// Whether InfluxDB 1.8 estimates rather than rewrites: a whole database's measurements or
/// series, with no clause that selects or groups (`LIMIT 0` is no limit).
fn estimated(c: &ShowCardinality) -> bool {
    matches!(c.of, CardinalityOf::Measurements | CardinalityOf::Series)
        && !c.exact
        && c.sources.is_empty()
        && c.condition.is_none()
        && c.group_by.is_empty()
        && c.limit.unwrap_or(0) == 0
        && c.offset.unwrap_or(0) == 0
}

/// The database's distinct measurements or series.
fn count_all(ctx: &Ctx, c: &ShowCardinality, db: &str, id: usize) -> Result<u64, String> {
    let series = c.of == CardinalityOf::Series;
    let rows = show::listed(
        ctx,
        &Some(db.to_string()),
        &[],
        None,
        id,
        series,
        &|from, filter| {
            let what = if series {
                "count()"
            } else {
                "count(DISTINCT measurement)"
            };
            format!("SELECT {what} FROM {from} WHERE {filter}")
        },
    )?;
    Ok(rows
        .rows
        .first()
        .and_then(|r| r.first())
        .and_then(Value::as_u64)
        .unwrap_or(0))
}

/// InfluxDB's refusal of a time condition, by what is counted (its words name the statement
/// it rewrote to, `EXACT` or not); `None` where it answers nothing instead.
fn time_refusal(of: &CardinalityOf) -> Option<&'static str> {
    Some(match of {
        CardinalityOf::Measurements => {
            "SHOW MEASUREMENT EXACT CARDINALITY doesn't support time in WHERE clause"
        }
        CardinalityOf::Series => {
            "SHOW SERIES EXACT CARDINALITY doesn't support time in WHERE clause"
        }
        CardinalityOf::TagKeys => {
            "SHOW TAG KEY EXACT CARDINALITY doesn't support time in WHERE clause"
        }
        CardinalityOf::FieldKeys => {
            "SHOW FIELD KEY CARDINALITY doesn't support time in WHERE clause"
        }
        CardinalityOf::TagValues(_) => return None,
    })
}

/// InfluxDB's `HasTimeExpr`: a comparison whose left side is `time`, through `AND`, `OR` and
/// parentheses.
fn has_time(e: &Expr) -> bool {
    match e {
        Expr::Paren(inner) => has_time(inner),
        Expr::Binary {
            lhs,
            op: BinaryOp::And | BinaryOp::Or,
            rhs,
        } => has_time(lhs) || has_time(rhs),
        Expr::Binary { lhs, .. } => {
            matches!(lhs.as_ref(), Expr::VarRef { name, .. } if name.eq_ignore_ascii_case("time"))
        }
        _ => false,
    }
}

/// The tags of `GROUP BY`; sluice groups counts by tags only.
fn tag_dimensions(group_by: &[Dimension]) -> Result<Vec<String>, String> {
    group_by
        .iter()
        .map(|d| match d {
            Dimension::Tag(k) => Ok(k.clone()),
            _ => Err("a SHOW ... CARDINALITY statement can only be grouped by tags".to_string()),
        })
        .collect()
}

/// Rows `(measurement, the group's tag values..., count)` over series `from`, ordered.
/// Measurements are counted in one group per tags (their measurement column is empty); field
/// keys are counted from the catalog, so only the groups matter there.
fn counts_sql(of: &CardinalityOf, from: &str, filter: &str, dims: &[String]) -> String {
    // A measurement column named as the table's would stand for it in `filter` too.
    let by_measurement = !matches!(of, CardinalityOf::Measurements);
    let mut keys = vec![if by_measurement {
        "measurement"
    } else {
        "__sl_m"
    }
    .to_string()];
    let mut cols = Vec::new();
    for (i, k) in dims.iter().enumerate() {
        cols.push(format!("tags[{}] AS __sl_d{i}", quote_str(k)));
        keys.push(format!("__sl_d{i}"));
    }
    // Groups come in the order of their tag sets, the tags sorted by key, as in InfluxDB.
    let mut by_key: Vec<(&String, &String)> = dims.iter().zip(&keys[1..]).collect();
    by_key.sort();
    let order: Vec<&str> = std::iter::once(keys[0].as_str())
        .chain(by_key.into_iter().map(|(_, col)| col.as_str()))
        .collect();
    let (measurement, count, join, key) = match of {
        CardinalityOf::Measurements => ("'' AS __sl_m", "uniqExact(measurement)", "", None),
        CardinalityOf::Series | CardinalityOf::FieldKeys => ("measurement", "count()", "", None),
        CardinalityOf::TagKeys => (
            "measurement",
            "length(groupUniqArrayArray(mapKeys(tags)))",
            "",
            None,
        ),
        CardinalityOf::TagValues(key) => (
            "measurement",
            "uniqExact(v)",
            " ARRAY JOIN mapKeys(tags) AS k, mapValues(tags) AS v",
            Some(meta::key_filter_sql(key)),
        ),
    };
    let select: Vec<String> = std::iter::once(measurement.to_string())
        .chain(cols)
        .chain(std::iter::once(count.to_string()))
        .collect();
    let key = key.map(|k| format!(" AND {k}")).unwrap_or_default();
    format!(
        "SELECT {} FROM {from}{join} WHERE {filter}{key} GROUP BY {} ORDER BY {}",
        select.join(", "),
        keys.join(", "),
        order.join(", ")
    )
}

/// One group's answer: InfluxDB's series of one row.
fn group_series(
    of: &CardinalityOf,
    measurement: &str,
    dims: &[String],
    tags: &[Value],
    n: u64,
) -> Value {
    let mut series = Map::new();
    if *of != CardinalityOf::Measurements {
        series.insert("name".into(), Value::from(measurement));
    }
    if !dims.is_empty() {
        let tags: Map<String, Value> = dims.iter().cloned().zip(tags.iter().cloned()).collect();
        series.insert("tags".into(), Value::Object(tags));
    }
    series.insert("columns".into(), json!(["count"]));
    series.insert("values".into(), json!([[n]]));
    Value::Object(series)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_influxql::TagKeyFilter;

    fn condition(q: &str) -> Expr {
        sluice_influxql::parse_expr(q).unwrap()
    }

    #[test]
    fn time_is_found_as_influxdb_finds_it() {
        assert!(has_time(&condition("time > now() - 1h")));
        assert!(has_time(&condition("host = 'a' AND (TIME < 5 OR x = 'y')")));
        assert!(!has_time(&condition("host = 'a'")));
        // Only on the left, as in InfluxDB.
        assert!(!has_time(&condition("now() - 1h < time")));
    }

    #[test]
    fn counts_group_by_measurement_and_tags() {
        let sql = counts_sql(
            &CardinalityOf::TagValues(TagKeyFilter::In(vec!["host".into(), "dc".into()])),
            "t",
            "db = 'g'",
            &["region".into()],
        );
        assert_eq!(
            sql,
            "SELECT measurement, tags['region'] AS __sl_d0, uniqExact(v) FROM t ARRAY JOIN \
             mapKeys(tags) AS k, mapValues(tags) AS v WHERE db = 'g' AND k IN ('host', 'dc') \
             GROUP BY measurement, __sl_d0 ORDER BY measurement, __sl_d0"
        );
        let sql = counts_sql(&CardinalityOf::Measurements, "t", "db = 'g'", &[]);
        assert_eq!(
            sql,
            "SELECT '' AS __sl_m, uniqExact(measurement) FROM t WHERE db = 'g' \
             GROUP BY __sl_m ORDER BY __sl_m"
        );
    }

    #[test]
    fn only_tags_group_counts() {
        assert!(tag_dimensions(&[Dimension::Tag("host".into())]).is_ok());
        assert!(tag_dimensions(&[Dimension::Wildcard]).is_err());
    }
}
