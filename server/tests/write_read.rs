//! Writes over HTTP into the real server and reads back through `/sql`.

mod common;

use std::io::Write;

use common::Server;

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

fn json_rows(body: &str) -> Vec<serde_json::Value> {
    body.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

#[test]
fn every_field_type_round_trips() {
    let s = Server::start(&[]);
    let r = s.write(
        "db=t",
        "m,host=a f=1.5,i=-3i,u=18446744073709551615u,s=\"hi\",b=true,b2=F 1700000000000000000\n",
    );
    assert_eq!(r.status, 204, "{}", r.body);
    s.wait_sql("SELECT count() FROM t_autogen_m", "1");
    let rows = json_rows(&s.sql(
        "SELECT toUnixTimestamp64Nano(time) AS t, f, i, toString(u) AS u, s, b, b2 FROM t_autogen_m FORMAT JSONEachRow",
    ));
    assert_eq!(
        rows[0],
        serde_json::json!({"t": 1700000000000000000u64, "f": 1.5, "i": -3, "u": "18446744073709551615", "s": "hi", "b": true, "b2": false})
    );
    // Column types follow the field types.
    let types = s.sql("SELECT name, type FROM system.columns WHERE table = 't_autogen_m' ORDER BY position FORMAT TSVRaw");
    assert_eq!(
        types.trim(),
        "time\tDateTime64(9, 'UTC')\nseries_id\tUInt64\nf\tNullable(Float64)\ni\tNullable(Int64)\nu\tNullable(UInt64)\ns\tNullable(String)\nb\tNullable(Bool)\nb2\tNullable(Bool)\n_sluice_seq\tUInt64\n_sluice_origin\tUInt64"
    );
    // The WAL sequence and origin columns are MATERIALIZED: not in `SELECT *`.
    let star = json_rows(&s.sql("SELECT * FROM t_autogen_m FORMAT JSONEachRow"));
    assert!(star[0].get("_sluice_seq").is_none(), "{star:?}");
    assert!(star[0].get("series_id").is_some(), "{star:?}");
}

#[test]
fn every_precision_scales_timestamps() {
    let s = Server::start(&[]);
    let cases = [
        (
            "n",
            1_700_000_000_123_456_789i64,
            1_700_000_000_123_456_789i64,
        ),
        ("ns", 1_700_000_000_123_456_789, 1_700_000_000_123_456_789),
        ("u", 1_700_000_000_123_456, 1_700_000_000_123_456_000),
        ("us", 1_700_000_000_123_456, 1_700_000_000_123_456_000),
        ("ms", 1_700_000_000_123, 1_700_000_000_123_000_000),
        ("s", 1_700_000_000, 1_700_000_000_000_000_000),
        ("m", 28_333_333, 28_333_333 * 60_000_000_000),
        ("h", 472_222, 472_222 * 3_600_000_000_000),
    ];
    for (i, (p, ts, _)) in cases.iter().enumerate() {
        let r = s.write(
            &format!("db=p&precision={p}"),
            &format!("m,k={i} v={i} {ts}"),
        );
        assert_eq!(r.status, 204, "{p}: {}", r.body);
    }
    s.wait_sql("SELECT count() FROM p_autogen_m", &cases.len().to_string());
    let got = s.sql("SELECT v, toUnixTimestamp64Nano(time) FROM p_autogen_m ORDER BY v FORMAT TSV");
    let want: Vec<String> = cases
        .iter()
        .enumerate()
        .map(|(i, (_, _, ns))| format!("{i}\t{ns}"))
        .collect();
    assert_eq!(got.trim(), want.join("\n"));
    let bad = s.write("db=p&precision=fortnight", "m v=1 1");
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("precision"), "{}", bad.body);
}

#[test]
fn escaping_survives_into_tables_and_series() {
    let s = Server::start(&[]);
    let body = concat!(
        r#"my\ meas\,ure,t\ k\=1=v\,1\ x,uni=ü✓ f\ ld\=x="say \"hi\" \\ ok",n=1i 1"#,
        "\n",
        r#"my\ meas\,ure,uni=ü✓,t\ k\=1=v\,1\ x n=2i 2"#,
        "\n"
    );
    let r = s.write("db=esc", body);
    assert_eq!(r.status, 204, "{}", r.body);
    s.wait_sql("SELECT count() FROM `esc_autogen_my meas,ure`", "2");
    let rows = json_rows(&s.sql(
        "SELECT `f ld=x` AS f, n, series_id FROM `esc_autogen_my meas,ure` ORDER BY n FORMAT JSONEachRow",
    ));
    assert_eq!(rows[0]["f"], "say \"hi\" \\ ok");
    // Tag order does not matter: both lines are one series.
    assert_eq!(rows[0]["series_id"], rows[1]["series_id"]);
    s.wait_sql(
        "SELECT count() FROM sluice_series FINAL WHERE db = 'esc'",
        "1",
    );
    let tags = json_rows(&s.sql(
        "SELECT measurement, tags['t k=1'] AS a, tags['uni'] AS b FROM sluice_series FINAL WHERE db = 'esc' FORMAT JSONEachRow",
    ));
    assert_eq!(
        tags[0],
        serde_json::json!({"measurement": "my meas,ure", "a": "v,1 x", "b": "ü✓"})
    );
}

#[test]
fn gzip_v2_and_rp_targets() {
    let s = Server::start(&[("SLUICE_DATABASES", "db2:autogen=inf*,raw=7d")]);
    let r = s.request(
        "POST",
        "/write?db=db2",
        &[("Content-Encoding", "gzip")],
        &gzip(b"cpu,h=a v=1 1\ncpu,h=b v=2 2\n"),
    );
    assert_eq!(r.status, 204, "{}", r.body);
    // Recent timestamps: the raw policy's 7-day TTL drops older rows on insert.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let r = s.request(
        "POST",
        "/api/v2/write?bucket=db2/raw&org=x&precision=s",
        &[],
        format!("cpu,h=a v=3 {now}\n").as_bytes(),
    );
    assert_eq!(r.status, 204, "{}", r.body);
    let r = s.request(
        "POST",
        "/write?db=db2&rp=raw",
        &[],
        format!("cpu,h=a v=4 {}\n", now * 1_000_000_000).as_bytes(),
    );
    assert_eq!(r.status, 204, "{}", r.body);
    s.wait_sql("SELECT count() FROM db2_autogen_cpu", "2");
    s.wait_sql("SELECT sum(v) FROM db2_raw_cpu", "7");
    // The raw policy's duration becomes the table's TTL.
    let ddl =
        s.sql("SELECT create_table_query FROM system.tables WHERE name = 'db2_raw_cpu' FORMAT TSV");
    assert!(
        ddl.contains("TTL toDateTime(time) + toIntervalSecond(604800)"),
        "{ddl}"
    );
    let r = s.request("POST", "/write?db=db2&rp=nope", &[], b"cpu v=1\n");
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(r.body.contains("retention policy not found"), "{}", r.body);
}

#[test]
fn msgpack_columnar_bodies() {
    let s = Server::start(&[]);
    let mut buf = Vec::new();
    // [{measurement, tags, timestamps, fields}]
    rmp::encode::write_array_len(&mut buf, 1).unwrap();
    rmp::encode::write_map_len(&mut buf, 4).unwrap();
    rmp::encode::write_str(&mut buf, "measurement").unwrap();
    rmp::encode::write_str(&mut buf, "mp").unwrap();
    rmp::encode::write_str(&mut buf, "tags").unwrap();
    rmp::encode::write_map_len(&mut buf, 1).unwrap();
    rmp::encode::write_str(&mut buf, "host").unwrap();
    rmp::encode::write_str(&mut buf, "a").unwrap();
    rmp::encode::write_str(&mut buf, "timestamps").unwrap();
    rmp::encode::write_array_len(&mut buf, 3).unwrap();
    for t in [1i64, 2, 3] {
        rmp::encode::write_sint(&mut buf, t).unwrap();
    }
    rmp::encode::write_str(&mut buf, "fields").unwrap();
    rmp::encode::write_map_len(&mut buf, 2).unwrap();
    rmp::encode::write_str(&mut buf, "v").unwrap();
    rmp::encode::write_array_len(&mut buf, 3).unwrap();
    for v in [1.5f64, 2.5, 3.5] {
        rmp::encode::write_f64(&mut buf, v).unwrap();
    }
    rmp::encode::write_str(&mut buf, "s").unwrap();
    rmp::encode::write_array_len(&mut buf, 3).unwrap();
    rmp::encode::write_str(&mut buf, "x").unwrap();
    rmp::encode::write_nil(&mut buf).unwrap();
    rmp::encode::write_str(&mut buf, "z").unwrap();
    let r = s.request(
        "POST",
        "/write?db=mp&precision=s",
        &[("Content-Type", "application/msgpack")],
        &buf,
    );
    assert_eq!(r.status, 204, "{}", r.body);
    s.wait_sql("SELECT count() FROM mp_autogen_mp", "3");
    let got =
        s.sql("SELECT toUnixTimestamp(time), v, s FROM mp_autogen_mp ORDER BY time FORMAT TSV");
    assert_eq!(got.trim(), "1\t1.5\tx\n2\t2.5\t\\N\n3\t3.5\tz");
    let r = s.request(
        "POST",
        "/write?db=mp",
        &[("Content-Type", "application/msgpack")],
        b"\xc1garbage",
    );
    assert_eq!(r.status, 400, "{}", r.body);
}

#[test]
fn partial_writes_keep_valid_lines_and_name_the_bad_one() {
    let s = Server::start(&[]);
    let r = s.write("db=pw", "m v=1 1\nm v= 2\nm v=3 3\nm,bad v=4\n");
    assert_eq!(r.status, 400, "{}", r.body);
    let err: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    let msg = err["error"].as_str().unwrap();
    assert!(
        msg.starts_with("partial write: unable to parse 'm v= 2'"),
        "{msg}"
    );
    assert!(msg.contains("line 2"), "{msg}");
    assert!(msg.ends_with("dropped=2"), "{msg}");
    s.wait_sql("SELECT count() FROM pw_autogen_m", "2");

    // Nothing valid at all: a plain parse error, still 400.
    let r = s.write("db=pw", "garbage\n");
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("unable to parse 'garbage'"), "{}", r.body);
}

#[test]
fn field_type_conflicts_are_rejected_per_line() {
    let s = Server::start(&[]);
    assert_eq!(s.write("db=fc", "m v=1 1").status, 204);
    let r = s.write("db=fc", "m v=2i 2\nm v=3 3\n");
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body.contains("field type conflict: input field \\\"v\\\" on measurement \\\"m\\\" is type integer, already exists as type float"),
        "{}",
        r.body
    );
    assert!(r.body.contains("dropped=1"), "{}", r.body);
    // Within one body, the first type wins.
    let r = s.write("db=fc", "n x=\"a\" 1\nn x=1 2\n");
    assert_eq!(r.status, 400, "{}", r.body);
    s.wait_sql("SELECT count() FROM fc_autogen_m", "2");
    s.wait_sql("SELECT count() FROM fc_autogen_n", "1");
    // A measurement whose table could not be created says so, for its lines only.
    let long = "€".repeat(42);
    let r = s.write("db=fc", &format!("{long} v=1 1\nm v=9 9\n"));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("measurement name too long"), "{}", r.body);
    assert!(r.body.contains("dropped=1"), "{}", r.body);
    s.wait_sql("SELECT count() FROM fc_autogen_m", "3");
    // A field called `time` is refused as InfluxDB does.
    let r = s.write("db=fc", "m time=1 4\n");
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("invalid field name"), "{}", r.body);
    // So are sluice's own columns, and only those lines are dropped.
    let r = s.write("db=fc", "m series_id=1 5\nm _sluice_seq=1 6\nm v=10 7\n");
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("series_id"), "{}", r.body);
    assert!(r.body.contains("dropped=2"), "{}", r.body);
    let r = s.write("db=fc", "m _sluice_seq=1 8\n");
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("_sluice_seq"), "{}", r.body);
    s.wait_sql("SELECT count() FROM fc_autogen_m", "4");
}

#[test]
fn oversize_malformed_gzip_and_gzip_bombs() {
    let s = Server::start(&[
        ("SLUICE_LIMITS_MAX_BODY_BYTES", "64KiB"),
        ("SLUICE_LIMITS_MAX_DECOMPRESSED_BYTES", "1MiB"),
    ]);
    let big = "m v=1\n".repeat(20_000);
    let r = s.write("db=o", &big);
    assert_eq!(r.status, 413, "{}", r.body);
    let r = s.request(
        "POST",
        "/write?db=o",
        &[("Content-Encoding", "gzip")],
        b"\x1f\x8b\x08\x00garbage",
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("gzip"), "{}", r.body);
    // 512 MiB of zeros compress to about half a megabyte... too big for the body limit, so the
    // bomb here is 64 MiB (64 KiB compressed) against a 1 MiB decompression limit.
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![b'0'; 1 << 20];
    for _ in 0..64 {
        enc.write_all(&zeros).unwrap();
    }
    let bomb = enc.finish().unwrap();
    assert!(bomb.len() < 64 << 10, "bomb is {} bytes", bomb.len());
    let r = s.request(
        "POST",
        "/write?db=o",
        &[("Content-Encoding", "gzip")],
        &bomb,
    );
    assert_eq!(r.status, 413, "{}", r.body);
    assert!(r.body.contains("decompressed"), "{}", r.body);
    // Still serving.
    assert_eq!(s.write("db=o", "m v=1 1").status, 204);
}

#[test]
fn unknown_database_without_auto_create() {
    let s = Server::start(&[
        ("SLUICE_AUTO_CREATE_DATABASES", "false"),
        ("SLUICE_DATABASES", "known"),
    ]);
    let r = s.write("db=unknown", "m v=1");
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&r.body).unwrap()["error"],
        "database not found: \"unknown\""
    );
    assert_eq!(s.write("db=known", "m v=1").status, 204);
    // CREATE DATABASE works even without auto-create, and survives a restart.
    let r = s.request("POST", "/query?q=CREATE+DATABASE+made", &[], b"");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(s.write("db=made", "m v=1").status, 204);
}

#[test]
fn auth_on_and_off() {
    let open = Server::start(&[]);
    assert_eq!(open.write("db=a", "m v=1").status, 204);

    let s = Server::start(&[("SLUICE_AUTH_TOKENS", "s3cret,other")]);
    let r = s.write("db=a", "m v=1");
    assert_eq!(r.status, 401, "{}", r.body);
    assert!(r
        .body
        .contains("unable to parse authentication credentials"));
    let r = s.write("db=a&u=x&p=wrong", "m v=1");
    assert_eq!(r.status, 401);
    assert!(r.body.contains("authorization failed"));
    assert_eq!(s.write("db=a&u=x&p=s3cret", "m v=1").status, 204);
    let r = s.request(
        "POST",
        "/write?db=a",
        &[("Authorization", "Token other")],
        b"m v=1",
    );
    assert_eq!(r.status, 204);
    let r = s.request(
        "POST",
        "/api/v2/write?bucket=a",
        &[("Authorization", "Token s3cret")],
        b"m v=1",
    );
    assert_eq!(r.status, 204);
    // Basic: user "u", password "s3cret".
    let r = s.request(
        "POST",
        "/write?db=a",
        &[("Authorization", "Basic dTpzM2NyZXQ=")],
        b"m v=1",
    );
    assert_eq!(r.status, 204);
    assert_eq!(s.request("POST", "/sql", &[], b"SELECT 1").status, 401);
    assert_eq!(
        s.request("GET", "/query?q=SHOW+DATABASES", &[], b"").status,
        401
    );
    // Probes stay open for kubelets and load balancers.
    assert_eq!(s.request("GET", "/ping", &[], b"").status, 204);
    assert_eq!(s.request("GET", "/ready", &[], b"").status, 200);
}

#[test]
fn influx_query_startup_statements() {
    let s = Server::start(&[("SLUICE_DATABASES", "telegraf:autogen=30d*,raw=7d")]);
    let r = s.request(
        "POST",
        "/query",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        b"q=CREATE+DATABASE+%22fresh%22",
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body.trim(), r#"{"results":[{"statement_id":0}]}"#);
    let r = s.request("GET", "/query?q=SHOW%20DATABASES", &[], b"");
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(
        v["results"][0]["series"][0],
        serde_json::json!({"name": "databases", "columns": ["name"], "values": [["fresh"], ["telegraf"]]})
    );
    let r = s.request(
        "GET",
        "/query?q=SHOW%20RETENTION%20POLICIES%20ON%20telegraf",
        &[],
        b"",
    );
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(
        v["results"][0]["series"][0]["values"],
        serde_json::json!([
            ["autogen", "720h0m0s", "24h0m0s", 1, true],
            ["raw", "168h0m0s", "24h0m0s", 1, false]
        ])
    );
    let r = s.request(
        "GET",
        "/query?q=SHOW%20RETENTION%20POLICIES%20ON%20fresh",
        &[],
        b"",
    );
    assert!(
        r.body.contains(r#"["autogen","0s","168h0m0s",1,true]"#),
        "{}",
        r.body
    );
}

#[test]
fn sql_is_read_only_and_refuses_the_outside_world() {
    let s = Server::start(&[]);
    assert_eq!(s.write("db=q", "m v=1 1").status, 204);
    s.wait_sql("SELECT count() FROM q_autogen_m", "1");
    let r = s.request(
        "GET",
        "/sql?q=SELECT%20v%20FROM%20q_autogen_m%20FORMAT%20CSV",
        &[],
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body.trim(), "1");
    assert!(r.header("content-type").unwrap().starts_with("text/csv"));
    // Default format is JSON.
    let r = s.request("POST", "/sql", &[], b"SELECT 1 AS one");
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["data"][0]["one"], 1);
    for q in [
        "INSERT INTO q_autogen_m (v) VALUES (2)",
        "CREATE TABLE x (a Int8) ENGINE = Memory",
        "DROP TABLE q_autogen_m",
        "ALTER TABLE q_autogen_m DELETE WHERE 1",
        "TRUNCATE TABLE q_autogen_m",
        "SET max_threads = 1",
        "SELECT 1 SETTINGS readonly = 0",
        "SELECT * FROM file('/etc/passwd', 'LineAsString')",
        "SELECT * FROM url('http://127.0.0.1:1/', CSV, 'a String')",
        "SELECT * FROM s3('http://127.0.0.1:1/b/k', CSV, 'a String')",
        "SELECT * FROM remote('127.0.0.1:1', system.one)",
        "SELECT * FROM executable('ls', TabSeparated, 'a String')",
        "SELECT * FROM mysql('127.0.0.1:1', 'd', 't', 'u', 'p')",
        "SELECT * FROM postgresql('127.0.0.1:1', 'd', 't', 'u', 'p')",
        "SELECT * FROM numbers(1) INTO OUTFILE '/tmp/sluice-out'",
        "SELECT 1; DROP TABLE q_autogen_m",
    ] {
        let r = s.request("POST", "/sql", &[], q.as_bytes());
        assert_eq!(r.status, 403, "{q}: {}", r.body);
        assert!(r.body.contains("query refused"), "{q}: {}", r.body);
    }
    // Data untouched.
    s.wait_sql("SELECT count() FROM q_autogen_m", "1");
    // A result with no rows is still a whole answer in the format asked for.
    let r = s.request(
        "POST",
        "/sql",
        &[],
        b"SELECT v FROM q_autogen_m WHERE v > 5",
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v: serde_json::Value = serde_json::from_str(&r.body)
        .unwrap_or_else(|e| panic!("empty result is not JSON ({e}): {:?}", r.body));
    assert_eq!(v["rows"], 0, "{}", r.body);
    assert_eq!(v["meta"][0]["name"], "v", "{}", r.body);
    let r = s.request(
        "POST",
        "/sql",
        &[],
        b"SELECT name FROM system.tables WHERE name = 'nope' FORMAT TSVWithNames",
    );
    assert_eq!((r.status, r.body.as_str()), (200, "name\n"));
    let r = s.request("POST", "/sql", &[], b"SELECT nope FROM nowhere");
    assert_eq!(r.status, 400, "{}", r.body);
}

#[test]
fn ops_endpoints() {
    let s = Server::start(&[]);
    let r = s.request("GET", "/ping", &[], b"");
    assert_eq!(r.status, 204);
    assert!(r.header("x-sluice-version").is_some());
    assert!(r.header("x-influxdb-version").is_some());
    assert_eq!(s.request("GET", "/health", &[], b"").status, 200);
    assert_eq!(s.request("GET", "/ready", &[], b"").status, 200);
    assert_eq!(s.write("db=ops", "m v=1 1\nm v=x\n").status, 400);
    s.wait_sql("SELECT count() FROM ops_autogen_m", "1");
    let m = s.request("GET", "/metrics", &[], b"").body;
    for name in [
        "sluice_http_request_duration_seconds_bucket{endpoint=\"write\"",
        "sluice_stage_duration_seconds_bucket{stage=\"parse\"",
        "sluice_stage_duration_seconds_bucket{stage=\"wal_commit\"",
        "sluice_stage_duration_seconds_bucket{stage=\"chdb_insert\"",
        "sluice_points_offered_total 2",
        "sluice_points_acknowledged_total 1",
        "sluice_points_rejected_total{reason=\"invalid\"} 1",
        "sluice_wal_backlog_bytes",
        "sluice_flush_lag_seconds",
        "sluice_table_parts{table=\"ops_autogen_m\"} 1",
        "sluice_series 1",
        "sluice_ready 1",
        // The batch was kept in memory from its write to its flush.
        "sluice_flush_points_read_back_total 0",
    ] {
        assert!(m.contains(name), "missing {name} in\n{m}");
    }
    // The traffic's shape, which the operator's calibration copies: points per request and
    // field values per point (nulls left out), by format and encoding.
    assert_eq!(s.write("db=ops", "m v=1,w=2 2\nm v=3 3\n").status, 204);
    let m = s.request("GET", "/metrics", &[], b"").body;
    for name in [
        "sluice_write_request_points_count{encoding=\"identity\",format=\"lp\"} 2",
        "sluice_write_request_points_sum{encoding=\"identity\",format=\"lp\"} 3",
        "sluice_write_field_values_total 4",
    ] {
        assert!(m.contains(name), "missing {name} in\n{m}");
    }
}

/// A counter's value in a Prometheus text exposition, summed over its label sets.
fn counter(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with([' ', '{']))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// The autoscaler reads a window's answered points against its offered ones: a write offered
/// and not yet answered at a scrape would read as points the pod failed to take.
#[test]
fn offered_points_never_run_ahead_of_the_answered_ones() {
    let s = Server::start(&[]);
    let batch: String = (0..2_000)
        .map(|i| format!("m,h=h{} v={i} {i}\n", i % 50))
        .collect();
    let bad = format!("{batch}m v=oops\n");
    let done = std::sync::atomic::AtomicBool::new(false);
    let (mut scrapes, mut ahead) = (0, Vec::new());
    std::thread::scope(|sc| {
        for w in 0..4 {
            let (s, done, body) = (&s, &done, if w == 0 { &bad } else { &batch });
            sc.spawn(move || {
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let st = s.write("db=inflight", body).status;
                    assert!(st == 204 || st == 400, "{st}");
                }
            });
        }
        for _ in 0..300 {
            let m = s.request("GET", "/metrics", &[], b"").body;
            let offered = counter(&m, "sluice_points_offered_total");
            let answered = counter(&m, "sluice_points_acknowledged_total")
                + counter(&m, "sluice_points_rejected_total");
            scrapes += 1;
            if offered > answered {
                ahead.push((offered, answered));
            }
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    assert!(
        ahead.is_empty(),
        "{} of {scrapes} scrapes saw more offered than answered: {:?}",
        ahead.len(),
        &ahead[..ahead.len().min(5)]
    );
    let m = s.request("GET", "/metrics", &[], b"").body;
    let acked = counter(&m, "sluice_points_acknowledged_total");
    assert!(
        acked > 0 && counter(&m, "sluice_points_rejected_total") > 0,
        "{m}"
    );
    assert_eq!(
        counter(&m, "sluice_points_offered_total"),
        acked + counter(&m, "sluice_points_rejected_total")
    );
}

#[test]
fn series_cardinality_limit_answers_422() {
    let s = Server::start(&[("SLUICE_LIMITS_MAX_SERIES", "3")]);
    assert_eq!(s.write("db=c", "m,h=1 v=1 1\nm,h=2 v=1 1\n").status, 204);
    let r = s.write(
        "db=c",
        "m,h=1 v=2 2\nm,h=3 v=1 1\nm,h=4 v=1 1\nm,h=5 v=1 1\n",
    );
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(r.body.contains("max-series"), "{}", r.body);
    assert!(r.body.contains("dropped=2"), "{}", r.body);
    s.wait_sql("SELECT count() FROM c_autogen_m", "4");
    // Known series keep being accepted.
    assert_eq!(s.write("db=c", "m,h=3 v=3 3").status, 204);
    // A refused series stays refused: its key was resolved once, but it was never recorded,
    // so the parser's cache of known keys must not let it through the next time.
    let r = s.write("db=c", "m,h=4 v=9 9\nm,h=1 v=9 9");
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(r.body.contains("dropped=1"), "{}", r.body);
    s.wait_sql("SELECT count() FROM c_autogen_m", "6");
    s.wait_sql(
        "SELECT count() FROM sluice_series FINAL WHERE db = 'c'",
        "3",
    );
}

#[test]
fn repeated_series_keys_are_recorded_once_and_rows_join_their_tags() {
    let s = Server::start(&[("SLUICE_POOL_FLUSH_INTERVAL", "50ms")]);
    // The same series written as in line protocol's many spellings: tag order, escapes.
    let first = "cpu,host=a,dc=x v=1 1\ncpu,dc=x,host=b v=2 2\nmy\\ cpu,k\\,1=v\\ 1 v=3 3\n";
    assert_eq!(s.write("db=rk", first).status, 204);
    // Known keys (remembered from the first write), the other tag order of a known series,
    // and a new series in one body.
    let second = "cpu,host=a,dc=x v=4 4\ncpu,host=b,dc=x v=5 5\nmy\\ cpu,k\\,1=v\\ 1 v=6 6\ncpu,host=c,dc=y v=7 7\n";
    assert_eq!(s.write("db=rk", second).status, 204);
    assert_eq!(s.write("db=rk", second).status, 204);
    s.wait_sql(
        "SELECT count() FROM sluice_series FINAL WHERE db = 'rk'",
        "4",
    );
    s.wait_sql("SELECT count() FROM rk_autogen_cpu", "8");
    s.wait_sql(
        "SELECT arrayStringConcat(groupArray(x), ',') FROM \
         (SELECT concat(s.tags['host'], '=', toString(c.v)) AS x FROM rk_autogen_cpu AS c \
          JOIN (SELECT series_id, tags FROM sluice_series FINAL WHERE db = 'rk') AS s USING series_id \
          ORDER BY c.time, c.v)",
        "a=1,b=2,a=4,a=4,b=5,b=5,c=7,c=7",
    );
    s.wait_sql(
        "SELECT count() FROM `rk_autogen_my cpu` AS c JOIN \
         (SELECT series_id FROM sluice_series FINAL WHERE tags['k,1'] = 'v 1') AS s USING series_id",
        "3",
    );
}

#[test]
fn backpressure_is_503_with_retry_after() {
    let s = Server::start(&[
        ("SLUICE_LIMITS_MAX_WAL_BACKLOG_BYTES", "1"),
        ("SLUICE_POOL_FLUSH_INTERVAL", "1h"),
    ]);
    assert_eq!(s.write("db=b", "m v=1 1").status, 204);
    let r = s.write("db=b", "m v=2 2");
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert!(r.body.contains("backlog"), "{}", r.body);
}

#[test]
fn sigterm_flushes_and_exits_zero_and_data_survives_restart() {
    let mut s = Server::start(&[("SLUICE_POOL_FLUSH_INTERVAL", "1h")]);
    assert_eq!(s.write("db=g", "m v=1 1\nm v=2 2").status, 204);
    let status = s.terminate();
    assert!(status.success(), "exit status {status}: {}", s.log_tail());
    assert!(
        s.log_tail().contains("write-ahead log flushed"),
        "{}",
        s.log_tail()
    );
    let dir = s.dir.clone();
    let s2 = Server::start_in(&dir, &[]);
    s2.wait_sql("SELECT count() FROM g_autogen_m", "2");
    // Databases created at run time are remembered.
    let r = s2.request("GET", "/query?q=SHOW+DATABASES", &[], b"");
    assert!(r.body.contains("\"g\""), "{}", r.body);
}

#[test]
fn acknowledged_points_survive_sigkill_before_flush() {
    let mut s = Server::start(&[("SLUICE_POOL_FLUSH_INTERVAL", "1h")]);
    assert_eq!(s.write("db=k", "m v=1 1\nm v=2 2").status, 204);
    s.restart();
    s.wait_sql("SELECT count() FROM k_autogen_m", "2");
    s.wait_sql(
        "SELECT count() FROM sluice_series FINAL WHERE db = 'k'",
        "1",
    );
    // Nothing was kept in memory across the restart: the flush read both points back.
    let m = s.request("GET", "/metrics", &[], b"").body;
    assert_eq!(counter(&m, "sluice_flush_points_read_back_total"), 2, "{m}");
    assert_eq!(counter(&m, "sluice_points_flushed_total"), 2, "{m}");
}

#[test]
fn relative_data_dir_works() {
    // The README's first command runs with `./data`; chDB must get an absolute path.
    let tmp = tempfile::tempdir().unwrap();
    let listen = format!(
        "127.0.0.1:{}",
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    );
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sluice-server"))
        .args(["--listen", &listen, "--data-dir", "./data"])
        .env("SLUICE_POOL_FLUSH_INTERVAL", "50ms")
        .current_dir(tmp.path())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://{listen}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while ureq::get(&format!("{url}/ready")).call().is_err() {
        assert!(std::time::Instant::now() < deadline, "not ready");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let r = ureq::post(&format!("{url}/write?db=rel")).send_string("m v=1 1");
    assert_eq!(r.map(|r| r.status()).unwrap_or(0), 204);
    let mut got = String::new();
    while std::time::Instant::now() < deadline {
        got = ureq::post(&format!("{url}/sql"))
            .send_string("SELECT count() FROM rel_autogen_m FORMAT TSV")
            .map(|r| r.into_string().unwrap_or_default())
            .unwrap_or_default();
        if got.trim() == "1" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(got.trim(), "1");
    assert!(tmp.path().join("data/chdb").is_dir());
}

#[test]
fn the_server_configures_chdbs_allocator_unless_told_otherwise() {
    let (var, value) = sluice_server::engine::CHDB_MALLOC_CONF;
    // The binary re-executed itself (same process) with the variable set.
    let s = Server::start(&[]);
    assert!(
        s.environ().contains(&format!("{var}={value}")),
        "{:?}",
        s.environ()
    );
    drop(s);
    // An operator's own setting is kept.
    let s = Server::start(&[(var, "dirty_decay_ms:1000")]);
    let env = s.environ();
    assert!(
        env.contains(&format!("{var}=dirty_decay_ms:1000")),
        "{env:?}"
    );
    assert!(!env.contains(&format!("{var}={value}")));
}

/// One bound for everything a `/query` request reads: several statements (or a regex over many
/// measurements) cannot each take `query.max_result_bytes`.
#[test]
fn influxql_answers_share_one_result_bound_per_request() {
    let s = Server::start(&[("SLUICE_QUERY_MAX_RESULT_BYTES", "8KiB")]);
    let body: Vec<String> = (0..400)
        .map(|i| format!("m,host=h{} v={i} {i}", i % 4))
        .collect();
    assert_eq!(s.write("db=b&precision=s", &body.join("\n")).status, 204);
    s.wait_sql("SELECT count() FROM b_autogen_m", "400");
    // InfluxQL reads the series through the series table, which flushes on its own.
    s.wait_sql(
        "SELECT count() FROM sluice_series FINAL WHERE db = 'b' AND measurement = 'm'",
        "4",
    );
    let one = "SELECT v FROM m LIMIT 40";
    let ask = |q: &str| {
        let path = format!(
            "/query?{}",
            serde_urlencoded::to_string([("db", "b"), ("q", q)]).unwrap()
        );
        let r = s.request("GET", &path, &[], b"");
        assert_eq!(r.status, 200, "{}", r.body);
        serde_json::from_str::<serde_json::Value>(&r.body).unwrap()
    };
    let v = ask(one);
    assert_eq!(
        v["results"][0]["series"][0]["values"]
            .as_array()
            .map(Vec::len),
        Some(40),
        "{v}"
    );
    let v = ask(&[one; 12].join("; "));
    let results = v["results"].as_array().unwrap();
    assert!(results[0].get("series").is_some(), "{v}");
    let last = results.last().unwrap();
    assert!(
        last["error"]
            .as_str()
            .is_some_and(|e| e.contains("query.max_result_bytes")),
        "the twelfth statement should be over the request's bound: {last}"
    );
    // Too large alone: an error naming the bound, and the server goes on.
    let v = ask("SELECT v FROM m");
    assert!(
        v["results"][0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("max_result_bytes")),
        "{v}"
    );
    assert_eq!(s.request("GET", "/ping", &[], b"").status, 204);
}
