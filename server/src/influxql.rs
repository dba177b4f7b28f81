//! The InfluxQL statements clients send at start-up (`/query`): `CREATE DATABASE`,
//! `SHOW DATABASES`, `SHOW RETENTION POLICIES`. Anything else is answered with an error in
//! InfluxDB's result shape, so clients report it instead of failing to parse the reply.

use std::time::Duration;

use serde_json::{json, Value};
use sluice_core::config::{RetentionDuration, RetentionPolicyConfig};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Statement {
    CreateDatabase {
        name: String,
        /// `WITH DURATION d` / `NAME rp`: the default policy to create with it.
        duration: Option<RetentionDuration>,
        policy: Option<String>,
    },
    ShowDatabases,
    ShowRetentionPolicies {
        db: Option<String>,
    },
    Unsupported(String),
}

/// Splits on `;` outside quotes and recognises each statement.
pub fn parse(q: &str) -> Result<Vec<Statement>, String> {
    let mut out = Vec::new();
    for stmt in split_statements(q) {
        let words = words(&stmt)?;
        if words.is_empty() {
            continue;
        }
        let up: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
        let up: Vec<&str> = up.iter().map(String::as_str).collect();
        let s = match up.as_slice() {
            ["SHOW", "DATABASES"] => Statement::ShowDatabases,
            ["SHOW", "RETENTION", "POLICIES"] => Statement::ShowRetentionPolicies { db: None },
            ["SHOW", "RETENTION", "POLICIES", "ON", _] => Statement::ShowRetentionPolicies {
                db: Some(words[4].clone()),
            },
            ["CREATE", "DATABASE", _, rest @ ..] => {
                let mut duration = None;
                let mut policy = None;
                let mut i = 0;
                if rest.first() == Some(&"WITH") {
                    i = 1;
                }
                while i < rest.len() {
                    match rest[i] {
                        "DURATION" if i + 1 < rest.len() => {
                            duration = Some(
                                words[3 + i + 1]
                                    .parse::<RetentionDuration>()
                                    .map_err(|e| format!("error parsing query: {e}"))?,
                            );
                            i += 2;
                        }
                        "NAME" if i + 1 < rest.len() => {
                            policy = Some(words[3 + i + 1].clone());
                            i += 2;
                        }
                        "REPLICATION" | "SHARD" if i + 1 < rest.len() => {
                            // Single-node: accepted and ignored, as one replica is all there is.
                            i += if rest[i] == "SHARD" { 3 } else { 2 };
                        }
                        other => {
                            return Err(format!(
                                "error parsing query: found {other}, expected DURATION, REPLICATION, SHARD, NAME"
                            ))
                        }
                    }
                }
                Statement::CreateDatabase {
                    name: words[2].clone(),
                    duration,
                    policy,
                }
            }
            _ => Statement::Unsupported(stmt.trim().to_string()),
        };
        out.push(s);
    }
    if out.is_empty() {
        return Err("missing required parameter \"q\"".into());
    }
    Ok(out)
}

fn split_statements(q: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut chars = q.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(qc), '\\') => {
                cur.push(c);
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
                let _ = qc;
            }
            (Some(qc), c) if c == qc => {
                quote = None;
                cur.push(c);
            }
            (None, '"' | '\'') => {
                quote = Some(c);
                cur.push(c);
            }
            (None, ';') => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out.into_iter().filter(|s| !s.trim().is_empty()).collect()
}

/// Whitespace-separated words; double-quoted identifiers lose their quotes and escapes.
fn words(stmt: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = stmt.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut w = String::new();
        if c == '"' {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err("error parsing query: unterminated identifier".into()),
                    Some('\\') => {
                        if let Some(n) = chars.next() {
                            w.push(n)
                        }
                    }
                    Some('"') => break,
                    Some(x) => w.push(x),
                }
            }
        } else {
            while let Some(&x) = chars.peek() {
                if x.is_whitespace() {
                    break;
                }
                w.push(x);
                chars.next();
            }
        }
        out.push(w);
    }
    Ok(out)
}

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
    fn statements() {
        assert_eq!(
            parse("SHOW DATABASES").unwrap(),
            vec![Statement::ShowDatabases]
        );
        assert_eq!(
            parse("create database \"tele graf\"; show retention policies on \"tele graf\"")
                .unwrap(),
            vec![
                Statement::CreateDatabase {
                    name: "tele graf".into(),
                    duration: None,
                    policy: None
                },
                Statement::ShowRetentionPolicies {
                    db: Some("tele graf".into())
                }
            ]
        );
        let s =
            parse("CREATE DATABASE t WITH DURATION 7d REPLICATION 1 SHARD DURATION 1h NAME raw")
                .unwrap();
        assert_eq!(
            s,
            vec![Statement::CreateDatabase {
                name: "t".into(),
                duration: Some(RetentionDuration(Some(Duration::from_secs(7 * 86400)))),
                policy: Some("raw".into())
            }]
        );
        assert!(matches!(
            parse("SELECT * FROM cpu").unwrap()[0],
            Statement::Unsupported(_)
        ));
        assert!(parse("").is_err());
        assert!(parse("CREATE DATABASE x WITH BOGUS 1").is_err());
    }

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
