//! Real Telegraf (built by `scripts/install-go-tools`; `$SLUICE_TELEGRAF` overrides the path)
//! writing into sluice: `inputs.file` reads a line-protocol file and `telegraf --once` sends it
//! through `outputs.influxdb` (which must create its database itself: auto-create is off) or
//! `outputs.influxdb_v2` (bucket `db/rp`, gzip by default). The data is read back with SQL.

mod common;

use common::Server;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const HOSTS: u64 = 5;
const CPU_STEPS: u64 = 100;
const DISK_STEPS: u64 = 10;
const DISK_PATHS: [&str; 2] = ["/", "/mnt/my disk"];
const BASE_NS: u64 = 1_700_000_000_000_000_000;

fn ts(step: u64) -> u64 {
    BASE_NS + step * 1_000_000_000
}

/// `CPU_STEPS * HOSTS` cpu points (float, integer, string and boolean fields) and
/// `DISK_STEPS * HOSTS * 2` disk points, one tag value with an escaped space.
fn line_protocol() -> String {
    let mut out = String::new();
    for i in 0..CPU_STEPS {
        for h in 0..HOSTS {
            let state = if i % 3 == 0 {
                r#"busy, \"very\""#
            } else {
                "ok"
            };
            out.push_str(&format!(
                "cpu,host=h{h} usage_user={},procs={}i,state=\"{state}\",up={} {}\n",
                i as f64 * 0.25 + h as f64,
                i * 10 + h,
                i % 2 == 0,
                ts(i)
            ));
        }
    }
    for i in 0..DISK_STEPS {
        for h in 0..HOSTS {
            for path in DISK_PATHS {
                out.push_str(&format!(
                    "disk,host=h{h},path={} free={}i,used_percent={} {}\n",
                    path.replace(' ', "\\ "),
                    1_000_000 + i,
                    h as f64 + 0.5,
                    ts(i)
                ));
            }
        }
    }
    out
}

/// Runs `telegraf --once` with `[[inputs.file]]` on the generated data and `output` (a TOML
/// table) as its only output.
fn run_telegraf(dir: &Path, output: &str) {
    let bin = common::go_tool("telegraf", "SLUICE_TELEGRAF");
    let data = dir.join("metrics.lp");
    std::fs::write(&data, line_protocol()).expect("write metrics.lp");
    let config = format!(
        r#"[agent]
  omit_hostname = true
  metric_batch_size = 100
  metric_buffer_limit = 10000
  flush_jitter = "0s"

[[inputs.file]]
  files = ["{}"]
  data_format = "influx"

{output}
"#,
        data.display()
    );
    let config_path = dir.join("telegraf.conf");
    std::fs::write(&config_path, &config).expect("write telegraf.conf");
    let log_path = dir.join("telegraf.log");
    let log = std::fs::File::create(&log_path).expect("telegraf log file");
    let log2 = log.try_clone().expect("telegraf log file");
    let mut child = Command::new(&bin)
        .arg("--config")
        .arg(&config_path)
        .arg("--once")
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log2))
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
    let status = common::wait_child(&mut child, Duration::from_secs(120));
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    println!("telegraf log:\n{log}");
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("telegraf --once exited with {s}\nconfig:\n{config}\nlog:\n{log}"),
        Err(e) => panic!("telegraf --once: {e}\nconfig:\n{config}\nlog:\n{log}"),
    }
    assert!(
        !log.contains(" E! "),
        "telegraf logged errors\nconfig:\n{config}\nlog:\n{log}"
    );
}

/// Every point, its types and a few exact values arrived in database `db` (policy `autogen`).
fn check_data(server: &Server, db: &str) {
    let cpu = format!("{db}_autogen_cpu");
    let disk = format!("{db}_autogen_disk");
    let series = |m: &str| {
        format!(
            "(SELECT DISTINCT series_id, tags FROM sluice_series WHERE db = '{db}' AND measurement = '{m}')"
        )
    };

    server.wait_sql(
        &format!("SELECT count() FROM {cpu}"),
        &(CPU_STEPS * HOSTS).to_string(),
    );
    server.wait_sql(
        &format!("SELECT count() FROM {disk}"),
        &(DISK_STEPS * HOSTS * DISK_PATHS.len() as u64).to_string(),
    );
    let procs_sum: u64 = (0..CPU_STEPS)
        .flat_map(|i| (0..HOSTS).map(move |h| i * 10 + h))
        .sum();
    server.wait_sql(
        &format!("SELECT sum(procs) FROM {cpu}"),
        &procs_sum.to_string(),
    );
    server.wait_sql(
        &format!(
            "SELECT toTypeName(usage_user), toTypeName(procs), toTypeName(state), toTypeName(up) FROM {cpu} LIMIT 1"
        ),
        "Nullable(Float64)\tNullable(Int64)\tNullable(String)\tNullable(Bool)",
    );
    // host h3 at step 42: 42 * 0.25 + 3, 42 * 10 + 3, 42 % 3 == 0, 42 is even.
    server.wait_sql(
        &format!(
            "SELECT usage_user, procs, state, up FROM {cpu} AS c JOIN {} AS s USING series_id \
             WHERE s.tags['host'] = 'h3' AND toUnixTimestamp64Nano(c.time) = {}",
            series("cpu"),
            ts(42)
        ),
        "13.5\t423\tbusy, \"very\"\ttrue",
    );
    server.wait_sql(
        &format!("SELECT count() FROM {cpu} WHERE state = 'busy, \"very\"'"),
        &(CPU_STEPS.div_ceil(3) * HOSTS).to_string(),
    );
    server.wait_sql(
        &format!("SELECT count() FROM {}", series("cpu")),
        &HOSTS.to_string(),
    );
    server.wait_sql(
        &format!("SELECT count() FROM {}", series("disk")),
        &(HOSTS * DISK_PATHS.len() as u64).to_string(),
    );
    server.wait_sql(
        &format!(
            "SELECT count(), min(free), max(free), sum(used_percent) FROM {disk} AS d JOIN {} AS s \
             USING series_id WHERE s.tags['path'] = '/mnt/my disk' AND s.tags['host'] = 'h1'",
            series("disk")
        ),
        &format!(
            "{DISK_STEPS}\t1000000\t{}\t{}",
            1_000_000 + DISK_STEPS - 1,
            DISK_STEPS as f64 * 1.5
        ),
    );
}

#[test]
fn telegraf_influxdb_v1_output_creates_its_database() {
    let server = Server::start(&[("SLUICE_AUTO_CREATE_DATABASES", "false")]);
    let dir = tempfile::tempdir().expect("temp dir");
    run_telegraf(
        dir.path(),
        &format!(
            r#"[[outputs.influxdb]]
  urls = ["{}"]
  database = "tg1"
  skip_database_creation = false
  timeout = "30s""#,
            server.url
        ),
    );
    let dbs = server.request("GET", "/query?q=SHOW%20DATABASES", &[], b"");
    assert!(
        dbs.status == 200 && dbs.body.contains("\"tg1\""),
        "tg1 must exist (only Telegraf's CREATE DATABASE can have made it): {} {}",
        dbs.status,
        dbs.body
    );
    check_data(&server, "tg1");
}

#[test]
fn telegraf_influxdb_v2_output_writes_to_bucket_db_rp() {
    let server = Server::start(&[
        ("SLUICE_AUTO_CREATE_DATABASES", "false"),
        ("SLUICE_DATABASES", "tg2"),
    ]);
    let dir = tempfile::tempdir().expect("temp dir");
    run_telegraf(
        dir.path(),
        &format!(
            r#"[[outputs.influxdb_v2]]
  urls = ["{}"]
  token = "any-token"
  organization = "x"
  bucket = "tg2/autogen"
  timeout = "30s""#,
            server.url
        ),
    );
    check_data(&server, "tg2");
}
