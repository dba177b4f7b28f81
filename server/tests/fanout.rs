//! Reads across a tenant's pods, with several real server processes on 127.0.0.1: the same
//! points written to one server, and spread at random over three that know each other, must
//! give the same `/query` answers through any of the three; and the ways a tenant's pods can
//! fail a read (a pod down, a slow pod, a pod that answers with an error, a pod whose share
//! fails after its first rows, a measurement only some pods have, field types that differ
//! between pods, several pods gathering at once).

mod common;

use std::time::{Duration, Instant};

use common::generated::more::{extra_statement, subquery_statement};
use common::generated::show::show_statement;
use common::generated::{statement, Rng};
use common::influxql::cases::{bound_queries, fitted_queries, queries, regrouped_queries};
use common::influxql::{get, points, same_within, settled};
use common::Server;
use serde_json::Value;

use common::tenant::{next, seed, write_doubling, Tenant, TOKEN};

fn query(pod: &Server, params: &str, q: &str) -> (u16, Value, Option<String>) {
    let path = format!(
        "/query?{params}&{}",
        serde_urlencoded::to_string([("q", q)]).expect("encode")
    );
    let r = pod.request("GET", &path, &[], b"");
    let v = serde_json::from_str(r.body.trim()).unwrap_or(Value::String(r.body.clone()));
    (
        r.status,
        v,
        r.header("X-Sluice-Partial").map(str::to_string),
    )
}

fn count_cpu(pod: &Server, params: &str) -> (Value, Option<String>) {
    let (status, v, partial) = query(
        pod,
        &format!("db=g&{params}"),
        "SELECT count(\"value\") FROM cpu",
    );
    assert_eq!(status, 200, "{v}");
    (v, partial)
}

/// Waits until the three pods together hold `n` points of `table`.
fn wait_total(t: &Tenant, table: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let total: usize = t
            .pods
            .iter()
            .map(|p| {
                let r = p.request(
                    "POST",
                    "/sql",
                    &[],
                    format!("SELECT count() FROM {table} FORMAT TSV").as_bytes(),
                );
                r.body.trim().parse::<usize>().unwrap_or(0)
            })
            .sum();
        if total == n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{table}: {total} of {n} points flushed"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Pods on 127.0.0.1, .2 and .3 of one port, as pods of one address each. A pod joins the
/// others from 127.0.0.1 (where the loopback sends from), which must not become the address
/// they read it at: right after starting, each pod's reads would ask the pod at 127.0.0.1 for
/// the others' shares (one share counted several times, others missing).
#[test]
fn pods_on_one_machine_are_read_at_their_own_addresses() {
    let port = common::free_port();
    let names: Vec<String> = (1..=3).map(|i| format!("127.0.0.{i}:{port}")).collect();
    let peers = names.join(",");
    let env = [
        ("SLUICE_CLUSTER_PEERS", peers.as_str()),
        ("SLUICE_CLUSTER_TOKEN", TOKEN),
    ];
    // One after the other, so each later pod joins the earlier ones.
    let pods: Vec<Server> = names.iter().map(|n| Server::start_at(n, &env)).collect();
    let expected: u64 = write_doubling(&pods).iter().sum();
    let deadline = Instant::now() + Duration::from_secs(30);
    for pod in &pods {
        loop {
            let (v, _) = count_cpu(pod, "");
            let count = v["results"][0]["series"][0]["values"][0][1].as_u64();
            if count == Some(expected) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{}: counted {count:?} of {expected}: {v}",
                pod.url
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[test]
fn three_pods_answer_every_query_as_one_pod_holding_everything() {
    let one = Server::start(&[]);
    let tenant = Tenant::start(3, &[]);
    let body = points();
    let w = one.write("db=g&precision=s", &body);
    assert_eq!(w.status, 204, "{}", w.body);
    // Spread at random, as the tenant's Service spreads writes: a series lands on several
    // pods, and a pod may hold none of a measurement.
    let mut state = seed().max(1);
    let mut parts = vec![Vec::new(); 3];
    for line in body.lines() {
        parts[(next(&mut state) % 3) as usize].push(line);
    }
    for (pod, lines) in tenant.pods.iter().zip(&parts) {
        if !lines.is_empty() {
            let w = pod.write("db=g&precision=s", &lines.join("\n"));
            assert_eq!(w.status, 204, "{}", w.body);
        }
    }
    let cpu = body.lines().filter(|l| l.starts_with("cpu")).count();
    let mem = body.lines().filter(|l| l.starts_with("mem")).count();
    one.wait_sql("SELECT count() FROM g_autogen_cpu", &cpu.to_string());
    one.wait_sql("SELECT count() FROM g_autogen_mem", &mem.to_string());
    let live = body.lines().filter(|l| l.starts_with("live")).count();
    one.wait_sql("SELECT count() FROM g_autogen_live", &live.to_string());
    wait_total(&tenant, "g_autogen_cpu", cpu);
    wait_total(&tenant, "g_autogen_mem", mem);
    wait_total(&tenant, "g_autogen_live", live);

    let mut failures = Vec::new();
    let range = format!(
        "time >= {} and time <= {}",
        common::influxql::ms(common::influxql::T0),
        common::influxql::ms(common::influxql::T0 + 599)
    );
    let mut all = queries();
    all.extend(regrouped_queries());
    // Several series at one time in one group, taken in series-key order on every pod.
    all.push(format!(
        "SELECT integral(\"value\") FROM \"cpu\" WHERE {range}"
    ));
    all.push(format!(
        "SELECT integral(\"value\") FROM \"cpu\" WHERE {range} GROUP BY time(1m)"
    ));
    // Generated statements too (`common::generated`), as `influxql_generated.rs` sends them
    // to InfluxDB 1.8.
    let gen_seed = common::test_seed();
    println!("generated statements: SLUICE_TEST_SEED={gen_seed} repeats them");
    let mut rng = Rng(gen_seed);
    all.extend((0..150).map(|_| statement(&mut rng)));
    all.extend((0..60).map(|_| show_statement(&mut rng)));
    all.extend((0..40).map(|_| subquery_statement(&mut rng)));
    all.extend((0..40).map(|_| extra_statement(&mut rng)));
    // `holt_winters()` of means over several series: InfluxDB's may differ in the last
    // bits, but three pods' equal one pod's, which add each bucket's points in time order.
    all.extend(fitted_queries());
    for (i, q) in all.iter().enumerate() {
        // Every pod coordinates some of the queries.
        let pod = &tenant.pods[i % 3];
        let tolerance = 1e-9;
        let (want, got) = settled(
            &|| {
                (
                    get(&|p| one.request("GET", p, &[], b""), q),
                    get(&|p| pod.request("GET", p, &[], b""), q),
                )
            },
            tolerance,
        );
        // A non-negative transform keeps a difference of nearly equal means that rounds to
        // 0 and drops one that rounds a bit below: those rows alone may come and go (README,
        // "Reads across the tenant").
        let same = |a: &Value, b: &Value| {
            same_within(a, b, tolerance)
                || (q.contains("non_negative_")
                    && same_within(
                        &rounding_rows_dropped(a),
                        &rounding_rows_dropped(b),
                        tolerance,
                    ))
        };
        if want.0 != got.0 || !same(&want.1, &got.1) {
            failures.push(format!(
                "{q}\n    one pod:    {} {}\n    three pods: {} {}",
                want.0, want.1, got.0, got.1
            ));
        }
    }
    // Bound parameters: the pods asked for shares bind them as the gathering pod did.
    let bound = bound_queries();
    for (i, (q, params)) in bound.iter().enumerate() {
        let pod = &tenant.pods[i % 3];
        let path = format!(
            "/query?{}",
            serde_urlencoded::to_string([
                ("db", "g"),
                ("epoch", "ms"),
                ("q", q),
                ("params", params)
            ])
            .expect("encode")
        );
        let answer = |s: &Server| {
            let r = s.request("GET", &path, &[], b"");
            let v = serde_json::from_str(r.body.trim()).unwrap_or(Value::String(r.body.clone()));
            (r.status, v)
        };
        let (want, got) = (answer(&one), answer(pod));
        // Means summed over pods in another order may differ in the last bit.
        if want.0 != got.0 || !same_within(&want.1, &got.1, 1e-9) {
            failures.push(format!(
                "{q} with {params}\n    one pod:    {want:?}\n    three pods: {got:?}"
            ));
        }
    }
    println!(
        "{} of {} queries answered the same",
        all.len() + bound.len() - failures.len(),
        all.len() + bound.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // /sql: an inner query on every pod, an outer one over their answers.
    let r = tenant.pods[1].request(
        "POST",
        "/sql",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        serde_urlencoded::to_string([
            ("inner", "SELECT count() AS c FROM g_autogen_cpu"),
            ("q", "SELECT sum(c) FROM tenant FORMAT TSV"),
        ])
        .expect("encode")
        .as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body.trim(), cpu.to_string());
    assert_eq!(r.header("X-Sluice-Scope"), Some("tenant"));
    let r = tenant.pods[1].request("POST", "/sql", &[], b"SELECT 1 FORMAT TSV");
    assert_eq!(r.header("X-Sluice-Scope"), Some("local"));
}

/// Each pod keeps its share of a `SHOW`, and a gathering pod the whole answer, while the
/// series tables are unchanged; a series new on one pod is in the next answers all the same.
#[test]
fn kept_show_answers_give_way_to_a_new_series() {
    let tenant = Tenant::start(3, &[]);
    let pods = [&tenant.pods[0], &tenant.pods[1], &tenant.pods[2]];
    for (pod, host) in pods.iter().zip(["a", "b", "c"]) {
        assert_eq!(
            pod.write("db=g", &format!("cpu,host={host} v=1 1")).status,
            204
        );
    }
    wait_total(&tenant, "sluice_series", 3);
    let values = |pod: &Server| {
        let (s, v, _) = query(pod, "db=g", "SHOW TAG VALUES FROM cpu WITH KEY = host");
        assert_eq!(s, 200, "{v}");
        v["results"][0]["series"][0]["values"].to_string()
    };
    let kept = |pod: &Server| {
        let metrics = pod.request("GET", "/metrics", &[], b"").body;
        metrics
            .lines()
            .find_map(|l| {
                l.strip_prefix("sluice_series_answers_total{how=\"kept\"} ")?
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .unwrap_or(0)
    };
    let all_kept = || pods.iter().map(|p| kept(p)).sum::<u64>();
    // Through each pod: the first read reads every pod's share, the others find the shares
    // kept by the reads before them (two shares each)...
    for pod in pods {
        assert_eq!(values(pod), r#"[["host","a"],["host","b"],["host","c"]]"#);
    }
    assert_eq!(all_kept(), 6, "shares kept");
    // ...and a second read through a pod finds its whole answer kept: no pod is asked for
    // its share again.
    for pod in pods {
        assert_eq!(values(pod), r#"[["host","a"],["host","b"],["host","c"]]"#);
    }
    assert_eq!(all_kept(), 9, "whole answers kept");
    assert_eq!(pods[2].write("db=g", "cpu,host=d v=1 1").status, 204);
    let deadline = Instant::now() + Duration::from_secs(20);
    let want = r#"[["host","a"],["host","b"],["host","c"],["host","d"]]"#;
    for pod in pods {
        loop {
            let v = values(pod);
            if v == want {
                break;
            }
            assert!(Instant::now() < deadline, "the new series is missing: {v}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A pod whose share fails after its first rows were sent (its stream then ends without its
/// last chunk) makes the read an error, never an answer of fewer rows: a gathering pod keeps
/// `SHOW` answers, so a short one would stay.
#[test]
fn a_share_cut_short_is_an_error_not_fewer_rows() {
    let tenant = Tenant::start(3, &[]);
    let tenant_count = |inner: &str| {
        tenant.pods[0].request(
            "POST",
            "/sql",
            &[("Content-Type", "application/x-www-form-urlencoded")],
            serde_urlencoded::to_string([
                ("inner", inner),
                ("q", "SELECT count() FROM tenant FORMAT TSV"),
            ])
            .expect("encode")
            .as_bytes(),
        )
    };
    let whole = tenant_count("SELECT number AS n FROM numbers(1000000)");
    assert_eq!(
        (whole.status, whole.body.trim()),
        (200, "3000000"),
        "{}",
        whole.body
    );
    // The engine sends blocks of 65,409 rows: the error comes after several were sent.
    let cut = tenant_count("SELECT throwIf(number > 300000, 'cut') AS n FROM numbers(1000000)");
    assert_ne!(cut.status, 200, "{}", cut.body);
    assert!(cut.body.contains("error"), "{}", cut.body);
}

#[test]
fn pods_that_hold_different_things_still_answer_together() {
    let tenant = Tenant::start(3, &[]);
    let [a, b, c] = [&tenant.pods[0], &tenant.pods[1], &tenant.pods[2]];
    // `only` exists on one pod; `mixed.v` is an integer on one pod and a float on another;
    // `clash.s` is a string on one pod and a number on another.
    assert_eq!(
        a.write(
            "db=d",
            "only,host=x v=2 1000000000\nmixed v=1i 1000000000\nclash s=\"x\" 1"
        )
        .status,
        204
    );
    assert_eq!(
        b.write("db=d", "mixed v=2.5 2000000000\nclash s=1 1")
            .status,
        204
    );
    assert_eq!(c.write("db=e", "other v=1 1").status, 204);
    wait_total(&tenant, "d_autogen_only", 1);
    wait_total(&tenant, "d_autogen_mixed", 2);
    wait_total(&tenant, "d_autogen_clash", 2);
    wait_total(&tenant, "e_autogen_other", 1);

    let (s, v, _) = query(c, "db=d", "SELECT sum(v), count(v) FROM only");
    assert_eq!(s, 200);
    assert_eq!(v["results"][0]["series"][0]["values"][0][1], 2.0, "{v}");
    let (_, v, _) = query(c, "db=d", "SELECT sum(v) FROM mixed");
    assert_eq!(v["results"][0]["series"][0]["values"][0][1], 3.5, "{v}");
    let (_, v, _) = query(a, "db=d", "SHOW FIELD KEYS FROM mixed");
    assert_eq!(
        v["results"][0]["series"][0]["values"][0],
        serde_json::json!(["v", "float"]),
        "{v}"
    );
    let (_, v, _) = query(a, "db=d", "SELECT * FROM clash");
    let err = v["results"][0]["error"].as_str().unwrap_or_default();
    assert!(
        err.contains("field type conflict") && err.contains("s of measurement clash"),
        "{v}"
    );
    // A database written through one pod exists for the whole tenant.
    let (_, v, _) = query(a, "", "SHOW DATABASES");
    let dbs = v["results"][0]["series"][0]["values"].to_string();
    assert!(dbs.contains("\"d\"") && dbs.contains("\"e\""), "{v}");
    let (_, v, _) = query(a, "db=e", "SELECT v FROM other");
    assert_eq!(v["results"][0]["series"][0]["values"][0][1], 1.0, "{v}");
    // /sql across the tenant: pods without the table answer no rows; a table no pod has, or
    // an inner query that writes, is a clear refusal.
    let tenant_sql = |inner: &str| {
        c.request(
            "POST",
            "/sql",
            &[("Content-Type", "application/x-www-form-urlencoded")],
            serde_urlencoded::to_string([
                ("inner", inner),
                ("q", "SELECT sum(n) FROM tenant FORMAT TSV"),
            ])
            .expect("encode")
            .as_bytes(),
        )
    };
    let r = tenant_sql("SELECT count() AS n FROM d_autogen_only");
    assert_eq!((r.status, r.body.trim()), (200, "1"), "{}", r.body);
    let r = tenant_sql("SELECT count() AS n FROM d_autogen_nosuch");
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body
            .contains("no pod of the tenant can run the inner query"),
        "{}",
        r.body
    );
    let r = tenant_sql("INSERT INTO d_autogen_only SELECT * FROM d_autogen_only");
    assert_eq!(r.status, 403, "{}", r.body);
}

#[test]
fn a_pod_that_does_not_answer_is_named_unless_partial_answers_are_asked_for() {
    let mut tenant = Tenant::start(3, &[("SLUICE_CLUSTER_RECEIVE_TIMEOUT", "2s")]);
    let lines: Vec<String> = (0..300)
        .map(|i| format!("cpu,host=h{} value={i} {}", i % 7, 1_600_000_000 + i))
        .collect();
    for (i, pod) in tenant.pods.iter().enumerate() {
        let part: Vec<&str> = lines[i * 100..(i + 1) * 100]
            .iter()
            .map(String::as_str)
            .collect();
        assert_eq!(pod.write("db=g&precision=s", &part.join("\n")).status, 204);
    }
    wait_total(&tenant, "g_autogen_cpu", 300);
    let (v, partial) = count_cpu(&tenant.pods[0], "");
    assert_eq!(v["results"][0]["series"][0]["values"][0][1], 300, "{v}");
    assert_eq!(partial, None);

    // Several pods gathering at once, each from all the others: a gathering read holds one
    // of its pod's gathering connections while its share runs on each pod's local ones, so
    // none waits on another's.
    let handles: Vec<_> = (0..6)
        .map(|i| {
            let url = tenant.pods[i % 3].url.clone();
            std::thread::spawn(move || {
                let mut totals = Vec::new();
                for _ in 0..10 {
                    let r = ureq::get(&format!(
                        "{url}/query?db=g&q=SELECT%20count(value)%20FROM%20cpu%20GROUP%20BY%20host"
                    ))
                    .timeout(Duration::from_secs(60))
                    .call();
                    let body = r
                        .map(|r| r.into_string().unwrap_or_default())
                        .unwrap_or_else(|e| e.to_string());
                    let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                    let total: i64 = v["results"][0]["series"]
                        .as_array()
                        .map(|s| {
                            s.iter()
                                .map(|s| s["values"][0][1].as_i64().unwrap_or(0))
                                .sum()
                        })
                        .unwrap_or(-1);
                    totals.push((total, body));
                }
                totals
            })
        })
        .collect();
    for h in handles {
        for (total, body) in h.join().expect("reader thread") {
            assert_eq!(total, 300, "{body}");
        }
    }

    // A stopped pod (it accepts connections and never answers) is a slow pod.
    let stopped = tenant.pods[2].pid().expect("running");
    let stopped_name = tenant.addresses()[2].clone();
    let signal = |sig: &str| {
        std::process::Command::new("kill")
            .args([sig, &stopped.to_string()])
            .status()
            .expect("kill")
    };
    signal("-STOP");
    let started = Instant::now();
    let (v, _) = count_cpu(&tenant.pods[0], "");
    let err = v["results"][0]["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        err.contains(&stopped_name) && err.contains("partial=true"),
        "{v}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let (v, partial) = count_cpu(&tenant.pods[0], "partial=true");
    signal("-CONT");
    assert_eq!(v["results"][0]["series"][0]["values"][0][1], 200, "{v}");
    assert_eq!(partial.as_deref(), Some(stopped_name.as_str()));
    let warning = v["results"][0]["messages"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(warning.contains(&stopped_name), "{v}");

    // A pod that is down.
    tenant.pods[2].kill();
    let (v, _) = count_cpu(&tenant.pods[1], "");
    let err = v["results"][0]["error"].as_str().unwrap_or_default();
    assert!(err.contains(&stopped_name), "{v}");
    let (v, partial) = count_cpu(&tenant.pods[1], "partial=true");
    assert_eq!(v["results"][0]["series"][0]["values"][0][1], 200, "{v}");
    assert!(partial.is_some());

    // A pod that answers with an error (here 404: it was not given the tenant's token) is
    // never left out silently, not even with partial=true.
    let stranger = Server::start(&[]);
    let mut peers = tenant.addresses()[..2].to_vec();
    peers.push(stranger.url.trim_start_matches("http://").to_string());
    tenant.set_peers(&peers);
    for params in ["", "partial=true"] {
        let (v, _) = count_cpu(&tenant.pods[0], params);
        let err = v["results"][0]["error"].as_str().unwrap_or_default();
        assert!(
            err.contains("answered with an error") && err.contains("404"),
            "{params}: {v}"
        );
    }

    // The internal endpoint: only for the tenant's pods, and never run twice by a HEAD.
    let pod = &tenant.pods[0];
    assert_eq!(
        pod.request(
            "GET",
            "/internal/v1/partial?p=eyJraW5kIjoicGluZyJ9",
            &[],
            b""
        )
        .status,
        401
    );
    let auth = format!("Bearer {TOKEN}");
    let ok = pod.request(
        "GET",
        "/internal/v1/partial?p=eyJraW5kIjoicGluZyJ9",
        &[("Authorization", &auth)],
        b"",
    );
    assert_eq!((ok.status, ok.body.as_str()), (200, "ok"));
    assert_eq!(
        pod.request(
            "HEAD",
            "/internal/v1/partial?p=eyJraW5kIjoicGluZyJ9",
            &[("Authorization", &auth)],
            b""
        )
        .status,
        405
    );
    // Even from a holder of the token, an inner query passes the pod's own guard.
    let forbidden = pod.request(
        "GET",
        "/internal/v1/partial?p=eyJraW5kIjoic3FsIiwicSI6IlNFTEVDVCAqIEZST00gdXJsKCdodHRwOi8vMTAuMC4wLjEvJywgQ1NWLCAneCBTdHJpbmcnKSJ9",
        &[("Authorization", &auth)],
        b"",
    );
    assert_eq!(forbidden.status, 403, "{}", forbidden.body);
    assert!(forbidden.body.contains("url()"), "{}", forbidden.body);
}

/// `answer` without the rows whose every value is null or 0 to the last bits of rounding
/// (|v| <= 1e-12), nor the series left without a row.
fn rounding_rows_dropped(answer: &Value) -> Value {
    let mut answer = answer.clone();
    let zero = |v: &Value| v.is_null() || v.as_f64().is_some_and(|x| x.abs() <= 1e-12);
    for result in answer["results"].as_array_mut().into_iter().flatten() {
        let Some(series) = result.get_mut("series").and_then(Value::as_array_mut) else {
            continue;
        };
        for s in series.iter_mut() {
            if let Some(rows) = s.get_mut("values").and_then(Value::as_array_mut) {
                rows.retain(|r| {
                    let values = r.as_array().and_then(|r| r.get(1..)).unwrap_or(&[]);
                    !values.iter().all(zero)
                });
            }
        }
        series.retain(|s| s["values"].as_array().is_some_and(|v| !v.is_empty()));
    }
    answer
}
