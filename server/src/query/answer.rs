//! The answers of the statements about databases and policies, in InfluxDB 1.x's shape.

use std::time::Duration;

use serde_json::{json, Value};
use sluice_core::config::RetentionPolicyConfig;

use super::json_text;

/// Go's `time.Duration` rendering, which InfluxDB uses for policy durations (`720h0m0s`).
pub fn go_duration(d: Option<Duration>) -> String {
    let Some(d) = d else { return "0s".into() };
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    if h > 0 {
        format!("{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

/// InfluxDB's default shard-group duration for a policy: 1h under two days, 1d under six
/// months, otherwise (and for infinite policies) 7d. sluice has no shards; clients display it.
pub fn shard_group_duration(policy: Option<Duration>) -> Duration {
    const DAY: u64 = 86_400;
    match policy.map(|d| d.as_secs()) {
        Some(s) if s < 2 * DAY => Duration::from_secs(3_600),
        Some(s) if s < 180 * DAY => Duration::from_secs(DAY),
        _ => Duration::from_secs(7 * DAY),
    }
}

/// A JSON object of `pairs`, moved in. `json!` with a `Value` inside serializes it into a new
/// tree (`serde_json::to_value`): a whole answer of 10,000 series was copied twice that way
/// and then dropped, 40 of the last point per host's 110 ms.
pub fn object<const N: usize>(pairs: [(&str, Value); N]) -> Value {
    Value::Object(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// One statement's result: a JSON value, or the series of a `SELECT` already written as JSON.
/// An answer of 10,000 series built as a tree of values took 5-8 ms to build, 5-6 to write and
/// 5-7 to free (the last point per host); written as it is shaped, it is neither built nor freed.
pub enum Outcome {
    Value(Value),
    Series {
        id: usize,
        /// Each series as a JSON object, in order.
        series: Vec<Vec<u8>>,
        messages: Option<Value>,
    },
}

impl Outcome {
    /// The statement's error, if it failed.
    pub fn error(&self) -> Option<&str> {
        match self {
            Outcome::Value(v) => v["error"].as_str(),
            Outcome::Series { .. } => None,
        }
    }

    /// Sets the statement's `messages` (warnings).
    pub fn set_messages(&mut self, m: Value) {
        match self {
            Outcome::Value(v) => v["messages"] = m,
            Outcome::Series { messages, .. } => *messages = Some(m),
        }
    }

    pub(super) fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        match self {
            Outcome::Value(v) => json_text::write_ordered(out, v),
            Outcome::Series {
                id,
                series,
                messages,
            } => {
                out.extend_from_slice(format!("{{\"statement_id\":{id}").as_bytes());
                if !series.is_empty() {
                    out.extend_from_slice(b",\"series\":");
                    json_text::array(out, series, |out, s| {
                        out.extend_from_slice(s);
                        Ok(())
                    })?;
                }
                if let Some(m) = messages {
                    out.extend_from_slice(b",\"messages\":");
                    json_text::write_ordered(out, m)?;
                }
                out.push(b'}');
                Ok(())
            }
        }
    }
}

/// InfluxDB's `{"results": [...]}` of `results`, as JSON text.
pub fn results_json(results: &[Outcome]) -> serde_json::Result<Vec<u8>> {
    let mut out = b"{\"results\":".to_vec();
    json_text::array(&mut out, results, |out, r| r.write(out))?;
    out.push(b'}');
    Ok(out)
}

pub fn result_ok(id: usize) -> Value {
    json!({ "statement_id": id })
}

pub fn result_error(id: usize, message: &str) -> Value {
    json!({ "statement_id": id, "error": message })
}

pub fn result_databases(id: usize, names: &[String]) -> Value {
    let values: Vec<Value> = names.iter().map(|n| json!([n])).collect();
    json!({
        "statement_id": id,
        "series": [{ "name": "databases", "columns": ["name"], "values": values }]
    })
}

pub fn result_policies(id: usize, policies: &[RetentionPolicyConfig]) -> Value {
    let values: Vec<Value> = policies
        .iter()
        .map(|p| {
            json!([
                p.name,
                go_duration(p.duration.0),
                go_duration(Some(shard_group_duration(p.duration.0))),
                1,
                p.default
            ])
        })
        .collect();
    json!({
        "statement_id": id,
        "series": [{
            "columns": ["name", "duration", "shardGroupDuration", "replicaN", "default"],
            "values": values
        }]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_render_like_go() {
        assert_eq!(go_duration(None), "0s");
        assert_eq!(
            go_duration(Some(Duration::from_secs(30 * 86400))),
            "720h0m0s"
        );
        assert_eq!(go_duration(Some(Duration::from_secs(90))), "1m30s");
        assert_eq!(
            shard_group_duration(Some(Duration::from_secs(86_400))),
            Duration::from_secs(3_600)
        );
        assert_eq!(
            shard_group_duration(Some(Duration::from_secs(30 * 86_400))),
            Duration::from_secs(86_400)
        );
        assert_eq!(shard_group_duration(None), Duration::from_secs(7 * 86_400));
    }
}
