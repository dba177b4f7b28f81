//! Series ids clustered by a tag (`series.cluster_tag`): a server making them answers every
//! InfluxQL request as a server with plain ids does, a read of one tag value opens only that
//! value's granules where plain ids spread it over nearly all of them, and a data directory
//! never takes another rule than the one it was written under.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::influxql::cases::{queries, regrouped_queries};
use common::influxql::{get, points, same_within};
use common::Server;

const CLUSTERED: &[(&str, &str)] = &[("SLUICE_SERIES_CLUSTER_TAG", "dc")];

fn load(server: &Server, db: &str, body: &str) {
    let create = format!("/query?q=CREATE%20DATABASE%20{db}");
    assert_eq!(server.request("POST", &create, &[], b"").status, 200);
    for chunk in body.lines().collect::<Vec<_>>().chunks(25_000) {
        let w = server.write(&format!("db={db}&precision=s"), &chunk.join("\n"));
        assert_eq!(w.status, 204, "write: {}", w.body);
    }
}

fn wait_counts(server: &Server, db: &str, body: &str, measurements: &[&str]) {
    for m in measurements {
        let n = body
            .lines()
            .filter(|l| l.starts_with(&format!("{m},")))
            .count();
        server.wait_sql(
            &format!("SELECT count() FROM {db}_autogen_{m}"),
            &n.to_string(),
        );
    }
}

#[test]
fn a_clustered_server_answers_as_a_plain_one() {
    let plain = Server::start(&[]);
    let clustered = Server::start(CLUSTERED);
    let body = points();
    for s in [&plain, &clustered] {
        load(s, "g", &body);
        wait_counts(s, "g", &body, &["cpu", "mem", "disk", "live"]);
    }
    // The clustering took: h1 and h2 (dc a and b) have ids apart from their plain ones, h3
    // (no dc) the same id on both servers.
    let ids = |s: &Server| {
        s.sql(
            "SELECT tags['host'], series_id FROM sluice_series FINAL \
             WHERE db = 'g' AND measurement = 'cpu' ORDER BY 1 FORMAT TSV",
        )
    };
    let (a, b) = (ids(&plain), ids(&clustered));
    let rows = |t: &str| t.lines().map(String::from).collect::<Vec<_>>();
    let (a, b) = (rows(&a), rows(&b));
    assert_eq!(a.len(), 3, "{a:?}");
    assert_ne!(a[0], b[0]);
    assert_ne!(a[1], b[1]);
    assert_eq!(a[2], b[2]);

    let mut checked = 0;
    for q in queries().into_iter().chain(regrouped_queries()) {
        let ask = |s: &Server| get(&|p| s.request("GET", p, &[], b""), &q);
        let (x, y) = (ask(&plain), ask(&clustered));
        assert_eq!(x.0, y.0, "{q}: status {} against {}", x.0, y.0);
        // Sums over several series add in the order of their ids, which differs: the last
        // bits of a mean may.
        assert!(
            same_within(&x.1, &y.1, 1e-12),
            "{q}\nplain:     {}\nclustered: {}",
            x.1,
            y.1
        );
        checked += 1;
    }
    assert!(checked > 100, "only {checked} requests compared");
}

/// `EXPLAIN indexes = 1`'s count of granules the primary key keeps, and of all granules, for
/// a count of the rows of `ids`.
fn granules(server: &Server, ids: &[u64]) -> (u64, u64) {
    let list = ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let plan = server.sql(&format!(
        "EXPLAIN indexes = 1 SELECT count() FROM r_autogen_cpu WHERE series_id IN ({list}) \
         FORMAT TSVRaw"
    ));
    let mut lines = plan.lines();
    // The `PrimaryKey` section's `Granules: kept/total` (a `MinMax` section may come first).
    while let Some(l) = lines.next() {
        if l.contains("PrimaryKey") {
            for l in lines.by_ref() {
                if let Some((_, g)) = l.split_once("Granules: ") {
                    let (kept, all) = g.split_once('/').expect("kept/total");
                    return (kept.parse().expect("kept"), all.parse().expect("total"));
                }
            }
        }
    }
    panic!("no primary key granules in: {plan}");
}

#[test]
fn a_read_of_one_value_opens_only_its_granules() {
    // 4 regions x 100 hosts x 250 points: 100,000 rows, twelve or more granules of 8,192.
    let mut lines = Vec::new();
    for i in 0..250i64 {
        for h in 0..400 {
            lines.push(format!(
                "cpu,host=h{h:03},region=r{} usage={}.5 {}",
                h % 4,
                (h + i) % 97,
                1_700_000_000 + i * 10
            ));
        }
    }
    let body = lines.join("\n");
    let plain = Server::start(&[]);
    let clustered = Server::start(&[("SLUICE_SERIES_CLUSTER_TAG", "region")]);
    let mut found = Vec::new();
    for s in [&plain, &clustered] {
        load(s, "r", &body);
        wait_counts(s, "r", &body, &["cpu"]);
        let ids: Vec<u64> = s
            .sql(
                "SELECT series_id FROM sluice_series FINAL \
                 WHERE db = 'r' AND tags['region'] = 'r1' ORDER BY 1 FORMAT TSV",
            )
            .lines()
            .map(|l| l.parse().expect("an id"))
            .collect();
        assert_eq!(ids.len(), 100);
        let prefixes: std::collections::HashSet<u64> = ids.iter().map(|i| i >> 48).collect();
        found.push((granules(s, &ids), prefixes.len()));
    }
    let (((p_kept, p_all), p_prefixes), ((c_kept, c_all), c_prefixes)) = (found[0], found[1]);
    eprintln!("granules kept: plain {p_kept} of {p_all}, clustered {c_kept} of {c_all}");
    assert_eq!(c_prefixes, 1, "one region's ids share their top 16 bits");
    assert!(p_prefixes > 1);
    assert!(p_all >= 12 && c_all >= 12, "{p_all} and {c_all} granules");
    // A quarter of the rows: about a quarter of the granules, and one more per part at most.
    assert!(
        c_kept * 2 <= c_all,
        "clustered: {c_kept} of {c_all} granules kept"
    );
    assert!(
        p_kept > c_kept && p_kept * 10 >= p_all * 9,
        "plain: {p_kept} of {p_all} granules kept; clustered {c_kept} of {c_all}"
    );
}

#[test]
fn a_data_directory_keeps_the_rule_it_was_written_under() {
    let mut s = Server::start(&[("SLUICE_SERIES_CLUSTER_TAG", "region")]);
    load(&s, "k", "cpu,host=a,region=eu v=1 1700000000");
    wait_counts(&s, "k", "cpu,host=a", &["cpu"]);
    s.terminate();
    for other in ["dc", ""] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice-server"))
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", common::free_port()))
            .arg("--data-dir")
            .arg(&s.dir)
            .env("SLUICE_SERIES_CLUSTER_TAG", other)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start sluice-server");
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!(
                    "the server started on data written clustered by region, asked for {other:?}"
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err)
            .expect("read stderr");
        assert!(!status.success());
        assert!(
            err.contains("cluster_tag=region") && err.contains("series.cluster_tag is fixed"),
            "{err}"
        );
    }
    // Under its own rule it starts, with its point.
    s.restart();
    s.wait_sql("SELECT count() FROM k_autogen_cpu", "1");
}
