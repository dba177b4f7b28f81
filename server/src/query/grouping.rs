//! `GROUP BY` tags: which of a measurement's tag keys group its series, and their SQL.

use sluice_core::names::quote_str;
use sluice_influxql::{Dimension, SelectStatement};

use super::key_regex::SimpleRegex;
use super::plan::Source;
use super::PlanError;

/// `GROUP BY` tags: the keys named, or for `*` and `/regex/` the measurement's keys that
/// match. Every series then carries every grouping key, `""` where it has no such tag (as in
/// InfluxDB).
pub(super) enum Grouping {
    None,
    Tags(Vec<String>),
}

impl Grouping {
    pub(super) fn of(stmt: &SelectStatement, src: &Source) -> Result<Self, PlanError> {
        let mut tags = Vec::new();
        for d in &stmt.group_by {
            match d {
                Dimension::Time { interval, .. } if interval.as_nanos() <= 0 => {
                    return Err(PlanError::Invalid(format!(
                        "invalid GROUP BY time interval: {interval} (it must be positive)"
                    )))
                }
                Dimension::Time { .. } => {}
                Dimension::Tag(t) => tags.push(t.clone()),
                Dimension::Wildcard => tags.extend(src.tag_keys.iter().cloned()),
                Dimension::Regex(re) => {
                    let re = compile(re.as_str())?;
                    tags.extend(src.tag_keys.iter().filter(|k| re.is_match(k)).cloned());
                }
            }
        }
        tags.sort();
        tags.dedup();
        Ok(if tags.is_empty() {
            Grouping::None
        } else {
            Grouping::Tags(tags)
        })
    }

    /// The grouping tag keys, sorted.
    pub(super) fn keys(&self) -> &[String] {
        match self {
            Grouping::None => &[],
            Grouping::Tags(t) => t,
        }
    }

    pub(super) fn tagged(&self) -> bool {
        !matches!(self, Grouping::None)
    }

    /// Whether the series' tag `key` is a grouping key (and so not a column of `*`).
    pub(super) fn groups_by(&self, key: &str) -> bool {
        match self {
            Grouping::None => false,
            Grouping::Tags(t) => t.iter().any(|k| k == key),
        }
    }

    /// The grouping tags as a JSON object in text, sorted by key.
    pub(super) fn sql(&self) -> String {
        match self {
            Grouping::None => "'{}'".into(),
            Grouping::Tags(keys) => tags_json(keys, "s.tags"),
        }
    }
}

/// The tags `keys` (sorted) of a series table's `tags` column as a JSON object in text.
pub(super) fn tags_json(keys: &[String], tags: &str) -> String {
    json_of(keys, |k| format!("{tags}[{}]", quote_str(k)))
}

/// The tags `keys` (sorted) as a JSON object in text, each value the SQL `value` gives for
/// its key.
pub(super) fn json_of(keys: &[String], value: impl Fn(&str) -> String) -> String {
    let pairs: Vec<String> = keys
        .iter()
        .map(|k| format!("{}, {}", quote_str(k), value(k)))
        .collect();
    format!("toJSONString(map({}))", pairs.join(", "))
}

/// A regex of the select list, compiled here only to filter key names (the engine runs every
/// other regex).
pub(super) fn compile(re: &str) -> Result<SimpleRegex, PlanError> {
    SimpleRegex::new(re)
}
