//! What reads run with: every reader's limits, a read's own settings beyond its pool's, and the
//! gathering connections' fetch settings.

use std::time::Duration;

use sluice_core::config::QueryConfig;

/// Settings one read needs beyond its pool's. A read-only connection takes no settings from
/// its queries, so a read with any of these runs on a connection of its own opened with them
/// (under a quarter of a millisecond), after waiting for a place in its pool like any read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadSettings {
    /// A ClickHouse map literal of table name to condition (`additional_table_filters`),
    /// applied to every read of those tables however the query names them.
    pub table_filters: Option<String>,
    /// `optimize_aggregation_in_order`: a `GROUP BY` on the tables' leading key column
    /// (`series_id`) aggregates each series as its rows stream by in key order instead of
    /// through a hash table. For the last point of every series it is 12 times faster (the
    /// hash path copies `argMax`'s tuple key for every row, as time only grows); with time
    /// buckets in the key it is 4 times slower, so only the plans that gain ask for it.
    pub aggregation_in_order: bool,
    /// A plan of an InfluxQL statement (or a pod's share of one): it runs on both threads
    /// while half of a query's memory per thread is free in the engine. chDB's rule (1 GiB free
    /// per thread) put every query of the default budget (an engine limit of 435 MiB) on one
    /// thread, and aggregations over every series took twice as long. A client's `/sql` keeps
    /// that rule: on two threads a `GROUP BY` of millions of keys needs more memory before it
    /// spills, and no single spill point kept both a million-key and a 3-million-key `GROUP BY`
    /// under 128 MiB (bench/README, "Two threads under a small engine limit"). A plan of `last`
    /// in key order is not one of these (see `query::plan::Plan::one_thread`).
    pub planned: bool,
    /// `enable_materialized_cte`: a `WITH name AS MATERIALIZED (...)` is computed once per
    /// query (a subquery's inner answer, which the outer statement reads twice).
    pub materialized_cte: bool,
    /// What is left of the request's `query.timeout` (see `query::fetch::Budget`), in place of
    /// the whole timeout every read has.
    pub max_execution_time: Option<std::time::Duration>,
}

impl ReadSettings {
    /// The read's settings as connection arguments; `threads_free_memory`: what a planned
    /// read needs free per thread (see [`ReadSettings::planned`]).
    pub(super) fn args(&self, threads_free_memory: u64) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(f) = &self.table_filters {
            args.push(format!("--additional_table_filters={f}"));
        }
        if self.aggregation_in_order {
            args.push("--optimize_aggregation_in_order=1".into());
        }
        if self.planned {
            args.push(format!(
                "--max_threads_min_free_memory_per_thread={threads_free_memory}"
            ));
        }
        if self.materialized_cte {
            args.push("--enable_materialized_cte=1".into());
        }
        if let Some(t) = self.max_execution_time {
            args.push(format!("--max_execution_time={}", t.as_secs_f64()));
        }
        args
    }
}

/// Settings every read-only connection runs its queries with: the per-query limits of
/// `[query]`, errors instead of silently cut results, and the priority of the request path's
/// background work, so that many slow queries at once leave the CPU to writes. A reader
/// cannot change them: `readonly = 1` refuses `SET` and `SETTINGS`.
pub fn reader_settings(q: &QueryConfig) -> Vec<String> {
    vec![
        "--readonly=1".into(),
        format!("--max_execution_time={}", q.timeout.as_secs_f64()),
        "--timeout_overflow_mode=throw".into(),
        format!("--max_memory_usage={}", q.max_memory_bytes.0),
        // Past half its memory a `GROUP BY` or `ORDER BY` goes on in files under the data
        // path instead of failing: on the 1 GiB default budget (128 MiB per query), the means
        // per 10 minutes and region over 10,000 series and 12 hours failed; with this they
        // take 2.8 s instead of 1.2-1.6 s with memory to spare (InfluxDB 1.8: 4.4 s).
        format!(
            "--max_bytes_before_external_group_by={}",
            q.max_memory_bytes.0 / 2
        ),
        format!(
            "--max_bytes_before_external_sort={}",
            q.max_memory_bytes.0 / 2
        ),
        format!(
            "--max_temporary_data_on_disk_size_for_query={}",
            q.max_memory_bytes.0.saturating_mul(SPILL_FACTOR)
        ),
        format!("--max_rows_to_read={}", q.max_rows_to_read),
        "--read_overflow_mode=throw".into(),
        format!("--max_result_bytes={}", q.max_result_bytes.0),
        "--result_overflow_mode=throw".into(),
        format!("--os_threads_nice_value_query={READER_NICE}"),
        "--max_threads=2".into(),
        // No JIT compilation of expressions, aggregate functions or sort keys: chDB compiles
        // an expression on the query thread the third time it sees it, and that query waits
        // 10-70 ms for the compiler (a one-host query took 86 ms on its fourth run instead of
        // 14-18). Every new shape pays it once per process: a new `GROUP BY time()` interval
        // (Grafana's changes with the zoom), aggregate or offset. Compiled code made no
        // difference beyond the run-to-run spread once warm, even over 50 M points
        // (bench/README, "No JIT for reads").
        "--compile_expressions=0".into(),
        "--compile_aggregate_expressions=0".into(),
        "--compile_sort_description=0".into(),
        // No join runtime filters: the engine would build a filter of the series table's ids
        // and check every row of the measurement's side against it, where the join itself
        // matches ten thousand ids at once. The last point per host's join took 41 ms with it
        // and 9.7 without; whole plans 6-32 % faster, none slower (bench/README, "No join
        // runtime filters").
        "--enable_join_runtime_filters=0".into(),
    ]
}

/// A query may spill this many times its memory (`query.max_memory_bytes`) to disk.
pub const SPILL_FACTOR: u64 = 8;

/// How a gathering connection fetches peers' partials (see [`Engine::with_gatherers`]).
pub fn gather_settings(connect_timeout: Duration, receive_timeout: Duration) -> Vec<String> {
    vec![
        "--readonly=2".into(),
        // A subquery's inner answer is computed once for the outer statement (see
        // `ReadSettings::materialized_cte`).
        "--enable_materialized_cte=1".into(),
        "--http_make_head_request=0".into(),
        "--http_skip_not_found_url_for_globs=0".into(),
        "--http_max_tries=1".into(),
        format!(
            "--http_connection_timeout={}",
            connect_timeout.as_secs_f64()
        ),
        format!("--http_receive_timeout={}", receive_timeout.as_secs_f64()),
        format!("--http_send_timeout={}", receive_timeout.as_secs_f64()),
    ]
}

/// CPU priority (Linux nice) of query threads: below the flush workers' (5), far below the
/// request path's (0).
pub const READER_NICE: i32 = 10;

/// chDB's merge threads run at a lower CPU priority than the request path (Linux nice 10; a
/// process setting, so every connection passes the same). Merges are background work that can
/// wait a moment; a request's latency cannot. Under load they otherwise competed for the same
/// two cores and set the p95 (knee 1.0-1.2 M points/s with p95 over 100 ms above it; 1.5 M
/// points/s at p95 91 ms with this). Idle CPU still goes to merges at once, and if they fall
/// far behind, chDB's parts limits slow inserts, the WAL backlog grows, and writes get 503.
/// chDB applies it only with CAP_SYS_NICE; without (a pod) the server lowers its merge threads
/// itself (`crate::priority::keep_merges_below_requests`, the same value).
pub(super) const MERGE_NICE: &str = "--os_threads_nice_value_merge_mutate=10";
