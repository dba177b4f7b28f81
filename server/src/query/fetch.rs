//! Running a planned query within a request's result budget, and naming the `[query]` limit
//! an engine error reports.

use std::time::{Duration, Instant};

use sluice_core::config::QueryConfig;

use crate::app::App;
use crate::engine::{QueryError, ReadSettings, Readers};

use super::shape;

/// What is left of a request's `query.max_result_bytes` and `query.timeout`: the rows of
/// every query a request runs (several statements, a regex over many measurements) count
/// against one bound, and so does their time. Each engine query is bounded by the timeout
/// too, but a statement over thousands of measurements runs thousands of them.
pub struct Budget {
    max: u64,
    left: std::cell::Cell<u64>,
    /// When the request's time runs out, and the `query.timeout` that set it (for messages).
    deadline: Option<(Instant, Duration)>,
}

/// A query started with less than the timeout minus this left runs with what is left as its
/// own limit: a connection of its own (a quarter of a millisecond), paid only by requests
/// that already took this long.
const TIME_LEFT_SLACK: Duration = Duration::from_secs(1);

impl Budget {
    /// A bound on bytes alone, for a request's own small reads (a ping).
    pub fn new(max: u64) -> Self {
        Self {
            max,
            left: std::cell::Cell::new(max),
            deadline: None,
        }
    }

    /// A request's bounds: `query.max_result_bytes` and `query.timeout`, from now.
    pub fn for_request(q: &QueryConfig) -> Self {
        Self {
            deadline: Some((Instant::now() + q.timeout, q.timeout)),
            ..Self::new(q.max_result_bytes.0)
        }
    }

    /// When the request's time runs out, if it is bounded.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline.map(|(at, _)| at)
    }

    /// Counts `bytes` of answer against what is left, or says the bound is passed.
    pub(super) fn take(&self, bytes: usize) -> Result<(), String> {
        let left = self.left.get();
        if bytes as u64 > left {
            return Err(self.passed());
        }
        self.left.set(left - bytes as u64);
        Ok(())
    }

    fn passed(&self) -> String {
        format!(
            "the answer is larger than query.max_result_bytes ({} bytes, for all the statements of a request together): narrow the time range, add a LIMIT or a coarser GROUP BY time",
            self.max
        )
    }

    /// The time a query started now may take, when it is less than a whole timeout by more
    /// than [`TIME_LEFT_SLACK`]; an error naming the timeout once none is left.
    fn time_left(&self) -> Result<Option<Duration>, String> {
        let Some((at, timeout)) = self.deadline else {
            return Ok(None);
        };
        let left = at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Self::expired(timeout));
        }
        Ok((left + TIME_LEFT_SLACK < timeout).then_some(left))
    }

    fn expired(timeout: Duration) -> String {
        format!(
            "query stopped: it exceeded query.timeout ({}), which bounds all the reads of a request together: ask for fewer measurements or statements at once",
            sluice_core::config::format_duration(timeout)
        )
    }
}

/// Runs `sql` on a query connection of `readers` and parses its rows, within what is left of
/// the request's `query.max_result_bytes` (the engine enforces it too, per query).
pub(super) fn fetch_on(
    app: &App,
    budget: &Budget,
    readers: Readers,
    sql: &str,
) -> Result<shape::Rows, String> {
    fetch_as(app, budget, readers, sql, true)
}

/// [`fetch_on`] for statements the engine does not stream (`DESCRIBE`).
pub(super) fn fetch_as(
    app: &App,
    budget: &Budget,
    readers: Readers,
    sql: &str,
    streamed: bool,
) -> Result<shape::Rows, String> {
    let settings = ReadSettings::default();
    shape::parse_rows(&output_with(
        app, budget, readers, &settings, sql, streamed,
    )?)
}

/// [`fetch_on`]'s rows as the engine wrote them (`JSONCompactEachRowWithNamesAndTypes`), for
/// an answer written straight from them rather than from parsed values.
pub(super) fn output_on(
    app: &App,
    budget: &Budget,
    readers: Readers,
    sql: &str,
) -> Result<Vec<u8>, String> {
    output_with(app, budget, readers, &ReadSettings::default(), sql, true)
}

/// [`output_on`] with `settings` beyond the pool's, for statements streamed or not.
pub(super) fn output_with(
    app: &App,
    budget: &Budget,
    readers: Readers,
    settings: &ReadSettings,
    sql: &str,
    streamed: bool,
) -> Result<Vec<u8>, String> {
    let q = &app.cfg.query;
    let limited;
    let time_left = budget.time_left()?;
    let settings = match time_left {
        Some(time) => {
            limited = ReadSettings {
                max_execution_time: Some(time),
                ..settings.clone()
            };
            &limited
        }
        None => settings,
    };
    let left = budget.left.get();
    let mut out: Vec<u8> = Vec::new();
    let mut over = false;
    let mut sink = |chunk: Vec<u8>| {
        if (out.len() + chunk.len()) as u64 > left {
            over = true;
            return false;
        }
        out.extend_from_slice(&chunk);
        true
    };
    let sql = format!("{sql} FORMAT JSONCompactEachRowWithNamesAndTypes");
    let started = std::time::Instant::now();
    let ran = app
        .engine
        .stream_with(
            readers,
            settings,
            &sql,
            streamed,
            q.queue_timeout,
            &mut sink,
        )
        .map_err(|e| match e {
            QueryError::Busy(n) => format!(
                "all {n} query connections are busy for longer than query.queue_timeout; retry"
            ),
            // The engine's own words would give what was left as its limit.
            QueryError::Engine(msg) if time_left.is_some() && msg.contains("TIMEOUT_EXCEEDED") => {
                Budget::expired(q.timeout)
            }
            QueryError::Engine(msg) => match limit_hit(&app.cfg.query, &msg) {
                Some(limit) => {
                    format!("query stopped: it exceeded {limit}: {}", engine_words(&msg))
                }
                None => statement_problem(&msg).unwrap_or(msg),
            },
        });
    // The planned SQL and its time, for `SLUICE_LOG=sluice_server::query=debug`: what a slow
    // InfluxQL statement became.
    tracing::debug!(
        ms = started.elapsed().as_secs_f64() * 1000.0,
        bytes = out.len(),
        ok = ran.is_ok(),
        %sql,
        "planned query"
    );
    ran?;
    if over {
        return Err(budget.passed());
    }
    budget.take(out.len())?;
    Ok(out)
}

/// [`output_on`] on this pod's connections for `sql` that reads nothing but the series
/// table (the `SHOW` statements): given again while the table is unchanged
/// ([`super::remember::SeriesAnswers`]), counted against the request's budget either way.
pub(super) fn series_output(app: &App, budget: &Budget, sql: &str) -> Result<Vec<u8>, String> {
    let writes = app.engine.series_writes();
    if let Some(out) = app.series_answers.kept(sql, writes) {
        budget.take(out.len())?;
        return Ok(out.to_vec());
    }
    let out = output_on(app, budget, Readers::Local, sql)?;
    app.series_answers
        .read(sql, writes, Some(out.as_slice().into()));
    Ok(out)
}

/// What an engine error says is wrong with the statement, in words that name it rather than
/// the engine's exception (its code, class and a link), for the errors a statement can cause
/// that its planning cannot see.
fn statement_problem(msg: &str) -> Option<String> {
    if let Some((_, rest)) = msg.split_once("cannot compile re2: ") {
        // "<pattern>, error: <what>. Look at https://..."
        let rest = rest.split_once(". Look at ").map_or(rest, |(r, _)| r);
        return Some(match rest.rsplit_once(", error: ") {
            Some((pattern, what)) => format!("invalid regular expression /{pattern}/: {what}"),
            None => format!("invalid regular expression: {rest}"),
        });
    }
    if msg.contains("Max query size exceeded") {
        return Some(
            "the statement's plan is larger than the engine reads (max_query_size, 256 KiB of SQL): ask for fewer fields or functions in one statement".into(),
        );
    }
    None
}

/// An engine error's own words, without the exception's code and class in front (the engine
/// repeats them for each layer it passes) and its version and code name behind: what follows
/// the limit a query hit.
pub fn engine_words(msg: &str) -> &str {
    let mut words = msg.trim();
    while let Some((code, rest)) = words
        .strip_prefix("Code: ")
        .and_then(|r| r.split_once(". DB::Exception: "))
    {
        if !code.chars().all(|c| c.is_ascii_digit()) {
            break;
        }
        words = rest;
    }
    if let Some((head, _)) = words.split_once(" (version ") {
        words = head;
    }
    if let Some((head, name)) = words.rsplit_once(" (") {
        let name = name.strip_suffix(')').unwrap_or("");
        if !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
            words = head;
        }
    }
    words
}

/// The `[query]` limit an engine error reports hitting, named as in the config file.
pub fn limit_hit(q: &sluice_core::config::QueryConfig, msg: &str) -> Option<String> {
    if msg.contains("TIMEOUT_EXCEEDED") {
        Some(format!(
            "query.timeout ({})",
            sluice_core::config::format_duration(q.timeout)
        ))
    } else if msg.contains("MEMORY_LIMIT_EXCEEDED") && msg.contains("(total)") {
        Some("the server's memory budget (limits.memory_bytes, or the pod's memory limit), which inserts, merges and queries share".into())
    } else if msg.contains("MEMORY_LIMIT_EXCEEDED") {
        Some(format!("query.max_memory_bytes ({})", q.max_memory_bytes))
    } else if msg.contains("Limit for temporary files size exceeded") {
        Some(format!(
            "the disk a query may spill to ({} x query.max_memory_bytes, {})",
            crate::engine::SPILL_FACTOR,
            q.max_memory_bytes
        ))
    } else if msg.contains("TOO_MANY_ROWS_OR_BYTES") {
        Some(format!("query.max_result_bytes ({})", q.max_result_bytes))
    } else if msg.contains("TOO_MANY_ROWS") {
        Some(format!("query.max_rows_to_read ({})", q.max_rows_to_read))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::{engine_words, statement_problem};

    #[test]
    fn an_engine_errors_words_lose_its_codes() {
        let msg = "Code: 241. DB::Exception: Code: 241. DB::Exception: Query memory limit exceeded: \
                   would use 154.01 MiB (attempt to allocate chunk of 64.00 MiB), maximum: 128.00 MiB. \
                   Untracked memory across all threads: 128.67 KiB. (MEMORY_LIMIT_EXCEEDED) \
                   (version 26.7.2.1). (MEMORY_LIMIT_EXCEEDED)";
        assert_eq!(
            engine_words(msg),
            "Query memory limit exceeded: would use 154.01 MiB (attempt to allocate chunk of \
             64.00 MiB), maximum: 128.00 MiB. Untracked memory across all threads: 128.67 KiB."
        );
        // Words that only look like a code are kept.
        assert_eq!(
            engine_words("Code: x. DB::Exception: y"),
            "Code: x. DB::Exception: y"
        );
        assert_eq!(engine_words("limit (of rows)"), "limit (of rows)");
    }

    #[test]
    fn a_statements_engine_errors_are_named_in_words() {
        let re2 = "Code: 427. DB::Exception: OptimizedRegularExpression: cannot compile re2: a(, error: missing ): a(. Look at https://github.com/google/re2/wiki/Syntax for reference. (CANNOT_COMPILE_REGEXP)";
        assert_eq!(
            statement_problem(re2).as_deref(),
            Some("invalid regular expression /a(/: missing ): a(")
        );
        let size = "Code: 62. DB::Exception: Max query size exceeded (can be increased with the `max_query_size` setting): Syntax error: failed at position 262144. (SYNTAX_ERROR)";
        assert!(statement_problem(size)
            .is_some_and(|m| m.contains("fewer fields") && !m.contains("DB::Exception")));
        assert_eq!(statement_problem("Code: 60. DB::Exception: no table"), None);
    }
}
