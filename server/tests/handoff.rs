//! A decommissioned pod hands its data to a pod that stays, with real server processes on
//! 127.0.0.1: under writers, through random SIGKILLs of the leaving pod and of the receiving
//! pod, every acknowledged point ends up on the pod that stays exactly once; reads through
//! either pod count every row once at every moment of the hand-off; the leaving pod ends
//! with no tables. A hand-off the receiver refuses (a field of another type) says why, and
//! cancelling it puts the pod back to taking writes with nothing lost or doubled. A series
//! the receiver first learns from a hand-off is in its reads by tag, though it remembered
//! that tag condition's series before. A read planned before its pod began to leave, which
//! computed that pod's share in its own query, reads again.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::tenant::{next, read_retries, seed, Tenant, TOKEN};
use common::Server;
use serde_json::Value;

fn auth() -> String {
    format!("Bearer {TOKEN}")
}

fn status(pod: &Server) -> Value {
    let r = pod.request("GET", "/decommission", &[("Authorization", &auth())], b"");
    serde_json::from_str(&r.body).unwrap_or(Value::Null)
}

/// `SELECT count(v), sum(v)` of `m` in `db` through `url` (gathering from every pod).
fn count_sum(url: &str, db: &str, m: &str) -> Result<(u64, f64), String> {
    let q = format!("SELECT count(\"v\"), sum(\"v\") FROM \"{m}\"");
    let path = format!(
        "{url}/query?db={db}&{}",
        serde_urlencoded::to_string([("q", q.as_str())]).unwrap()
    );
    let r = ureq::get(&path)
        .timeout(Duration::from_secs(30))
        .call()
        .map_err(|e| e.to_string())?;
    let v: Value = serde_json::from_str(&r.into_string().map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let res = &v["results"][0];
    if let Some(e) = res["error"].as_str() {
        return Err(e.to_string());
    }
    let row = &res["series"][0]["values"][0];
    Ok((row[1].as_u64().unwrap_or(0), row[2].as_f64().unwrap_or(0.0)))
}

/// `count(), sum(v)` of `m` in `db` across the tenant with `/sql`'s `inner`, through `url`.
fn sql_count_sum(url: &str, db: &str, m: &str) -> Result<(u64, f64), String> {
    let form = serde_urlencoded::to_string([
        (
            "inner",
            format!("SELECT count() AS c, sum(v) AS s FROM {db}_autogen_{m}").as_str(),
        ),
        ("q", "SELECT sum(c), sum(s) FROM tenant FORMAT TSV"),
    ])
    .unwrap();
    let r = ureq::post(&format!("{url}/sql"))
        .timeout(Duration::from_secs(30))
        .set("Content-Type", "application/x-www-form-urlencoded")
        .send_string(&form);
    let body = match r {
        Ok(r) => r.into_string().map_err(|e| e.to_string())?,
        Err(ureq::Error::Status(code, r)) => {
            return Err(format!("{code}: {}", r.into_string().unwrap_or_default()))
        }
        Err(e) => return Err(e.to_string()),
    };
    let mut cols = body.trim().split('\t');
    let c = cols.next().and_then(|c| c.parse().ok());
    let s = cols.next().and_then(|s| s.parse().ok());
    c.zip(s)
        .ok_or_else(|| format!("not a count and a sum: {body:?}"))
}

/// Static data: three measurements of different field types, each point written to one of
/// the two pods. Returns each measurement's count and sum of `v`.
fn write_static(t: &Tenant, rows: u64, state: &mut u64) -> Vec<(&'static str, u64, f64)> {
    let mut out = Vec::new();
    for (m, extra) in [("cpu", ""), ("disk", ",ok=true"), ("mem", ",s=\"x y\"")] {
        let mut parts = vec![String::new(), String::new()];
        let mut sum = 0.0;
        for i in 0..rows {
            let v = (i % 1000) as f64 / 4.0;
            sum += v;
            let line = format!(
                "{m},host=h{} v={v}{extra} {}\n",
                i % 700,
                1_700_000_000_000_000_000u64 + i * 1000
            );
            parts[(next(state) % 2) as usize].push_str(&line);
        }
        for (pod, body) in t.pods.iter().zip(&parts) {
            let w = pod.write("db=s", body);
            assert_eq!(w.status, 204, "{}", w.body);
        }
        out.push((m, rows, sum));
    }
    out
}

fn wait_counts(url: &str, want: &[(&str, u64, f64)]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    for (m, n, sum) in want {
        loop {
            match count_sum(url, "s", m) {
                Ok((c, s)) if c == *n && (s - sum).abs() < 1e-6 => break,
                got => assert!(Instant::now() < deadline, "{m}: {got:?}, want {n}"),
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// What became of a batch of writes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Outcome {
    Acknowledged,
    /// Answered with an error status: not stored.
    Refused,
    /// No answer (the pod was killed): stored or not, but wholly.
    Unknown,
}

/// Writes batches of 200 unique values to `live.w` (batch `b` holds `200b..200b+200`),
/// round robin over the pods as a Service spreads writes, until `stop`.
fn writer(urls: Vec<String>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<Outcome>> {
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let mut pod = 0usize;
        while !stop.load(Ordering::Acquire) {
            let i = out.len() as u64 * 200;
            let body: String = (i..i + 200)
                .map(|v| {
                    format!(
                        "w,host=h{} v={v} {}\n",
                        v % 50,
                        1_700_000_000_000_000_000u64 + v
                    )
                })
                .collect();
            let outcome = match ureq::post(&format!("{}/write?db=live", urls[pod]))
                .timeout(Duration::from_secs(10))
                .send_string(&body)
            {
                Ok(r) if r.status() == 204 => Outcome::Acknowledged,
                Ok(_) | Err(ureq::Error::Status(..)) => Outcome::Refused,
                Err(_) => Outcome::Unknown,
            };
            if outcome != Outcome::Acknowledged {
                std::thread::sleep(Duration::from_millis(20));
            }
            out.push(outcome);
            pod = (pod + 1) % urls.len();
        }
        out
    })
}

/// Every acknowledged batch is stored once, every refused one not at all, and each one
/// without an answer wholly or not at all. The last batches were acknowledged moments ago:
/// an acknowledged batch not yet stored is waited for (up to 30 s) while the WAL flushes it.
fn check_batches(pod: &Server, batches: &[Outcome]) {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(30);
    let stored = loop {
        let stored: std::collections::HashMap<usize, u64> = pod
            .sql("SELECT toUInt64(intDiv(v, 200)), count() FROM live_autogen_w GROUP BY 1 FORMAT TSV")
            .lines()
            .filter_map(|l| {
                let (b, n) = l.split_once('\t')?;
                Some((b.parse().ok()?, n.parse().ok()?))
            })
            .collect();
        let unflushed = batches.iter().enumerate().any(|(b, o)| {
            *o == Outcome::Acknowledged && stored.get(&b).copied().unwrap_or(0) < 200
        });
        if !unflushed || Instant::now() > deadline {
            println!("stored batches read after {:?}", started.elapsed());
            break stored;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    for (b, outcome) in batches.iter().enumerate() {
        let n = stored.get(&b).copied().unwrap_or(0);
        let ok = match outcome {
            Outcome::Acknowledged => n == 200,
            Outcome::Refused => n == 0,
            Outcome::Unknown => n == 0 || n == 200,
        };
        assert!(ok, "batch {b} ({outcome:?}) has {n} of 200 points stored");
    }
    assert!(stored.keys().all(|b| *b < batches.len()));
}

/// Reads the static measurements through both pods until `stop`, with InfluxQL and with
/// `/sql` across the tenant in turn; every answer that is not an error must be exact. Returns
/// (exact answers, errors).
fn reader(
    urls: Vec<String>,
    want: Vec<(&'static str, u64, f64)>,
    stop: Arc<AtomicBool>,
    wrong: Arc<Mutex<Vec<String>>>,
) -> std::thread::JoinHandle<(u64, u64)> {
    std::thread::spawn(move || {
        let (mut exact, mut errors) = (0u64, 0u64);
        let mut k = 0usize;
        while !stop.load(Ordering::Acquire) {
            let url = &urls[k % urls.len()];
            let (m, n, sum) = want[k % want.len()];
            let sql = (k / urls.len()) % 2 == 1;
            k += 1;
            let got = if sql {
                sql_count_sum(url, "s", m)
            } else {
                count_sum(url, "s", m)
            };
            match got {
                Ok((c, s)) if c == n && (s - sum).abs() < 1e-6 => exact += 1,
                Ok(got) => wrong.lock().unwrap().push(format!(
                    "{m} through {url} ({}): {got:?}, want ({n}, {sum})",
                    if sql { "/sql" } else { "InfluxQL" }
                )),
                // A table dropped by the leaving pod under a read is a stale view, which the
                // gathering pod reads again: never an error of its own.
                Err(e) if e.contains("UNKNOWN_TABLE") => wrong.lock().unwrap().push(format!(
                    "{m} through {url} ({}): {}",
                    if sql { "/sql" } else { "InfluxQL" },
                    &e[..e.len().min(600)]
                )),
                Err(e) => {
                    errors += 1;
                    if errors % 40 == 1 {
                        println!("a read failed: {}", &e[..e.len().min(300)]);
                    }
                }
            }
        }
        (exact, errors)
    })
}

/// Cancels `pod`'s decommission and waits until it takes writes again.
fn cancel_and_wait_ready(pod: &Server) {
    let cancelled = pod.request(
        "DELETE",
        "/decommission",
        &[("Authorization", &auth())],
        b"",
    );
    assert!(
        cancelled.status == 200 || cancelled.status == 202,
        "{}",
        cancelled.body
    );
    wait_phase(pod, "none", Duration::from_secs(60));
    assert_eq!(pod.request("GET", "/ready", &[], b"").status, 200);
}

/// Asks `pod` to leave and hand its data to `to`.
fn decommission(pod: &Server, to: &str) -> common::Resp {
    pod.request(
        "POST",
        &format!("/decommission?to={to}"),
        &[("Authorization", &auth())],
        b"",
    )
}

fn wait_phase(pod: &Server, phase: &str, timeout: Duration) -> Value {
    let deadline = Instant::now() + timeout;
    loop {
        let s = status(pod);
        if s["phase"] == phase {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "phase {phase} not reached: {s}\n{}",
            pod.log_tail()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `SELECT count()` of `table` across the tenant with `/sql`'s `inner`, through `pod`.
fn tenant_count(pod: &Server, table: &str) -> common::Resp {
    pod.request(
        "POST",
        "/sql",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        serde_urlencoded::to_string([
            (
                "inner",
                format!("SELECT count() AS c FROM {table}").as_str(),
            ),
            ("q", "SELECT sum(c) FROM tenant FORMAT TSV"),
        ])
        .unwrap()
        .as_bytes(),
    )
}

fn own_tables(pod: &Server) -> String {
    pod.sql(
        "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name != 'sluice_series' FORMAT TSV",
    )
    .trim()
    .to_string()
}

#[test]
fn a_pod_hands_everything_over_exactly_once_through_kills_of_either_side() {
    let mut state = seed().max(1);
    let mut t = Tenant::start(
        2,
        &[
            ("SLUICE_CLUSTER_HANDOFF_CHUNK_ROWS", "1000"),
            ("SLUICE_LIMITS_PRETOUCH_BYTES", "0"),
        ],
    );
    let urls: Vec<String> = t.pods.iter().map(|p| p.url.clone()).collect();
    let want = write_static(&t, 150_000, &mut state);
    wait_counts(&urls[0], &want);

    let stop = Arc::new(AtomicBool::new(false));
    let wrong = Arc::new(Mutex::new(Vec::new()));
    let writes = writer(urls.clone(), stop.clone());
    let reads = reader(urls.clone(), want.clone(), stop.clone(), wrong.clone());
    std::thread::sleep(Duration::from_millis(500));

    let started = decommission(&t.pods[1], &t.addresses()[0]);
    assert_eq!(started.status, 202, "{}", started.body);

    // Kill either side at random moments until the hand-off is over (at least ten kills:
    // the chunks are small, and each kill interrupts whatever step is under way).
    let kills = AtomicU64::new(0);
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let s = status(&t.pods[1]);
        if s["phase"] == "empty" {
            break;
        }
        assert!(Instant::now() < deadline, "no end: {s}");
        if kills.load(Ordering::Relaxed) < 12 {
            std::thread::sleep(Duration::from_millis(200 + next(&mut state) % 700));
            let victim = (next(&mut state) % 2) as usize;
            println!(
                "kill {} of pod {victim} at {}",
                kills.load(Ordering::Relaxed) + 1,
                s["handoff"]
            );
            if victim == 1 {
                t.pods[1].respawn();
            } else {
                t.pods[0].restart();
            }
            kills.fetch_add(1, Ordering::Relaxed);
        } else {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let kills = kills.into_inner();
    println!("hand-off over after {kills} kills: {}", status(&t.pods[1]));
    stop.store(true, Ordering::Release);
    let batches = writes.join().unwrap();
    let acked = batches
        .iter()
        .filter(|o| **o == Outcome::Acknowledged)
        .count();
    let (exact, errors) = reads.join().unwrap();
    println!("reads during the hand-off: {exact} exact, {errors} failed (a pod down)");
    let wrong = wrong.lock().unwrap().clone();
    assert!(wrong.is_empty(), "reads that were not exact: {wrong:?}");
    assert!(exact > 20, "too few reads ran: {exact}");
    assert!(kills >= 10, "the hand-off ended after {kills} kills");

    // Everything is on the pod that stays, once; the leaving pod holds no table and no series.
    wait_counts(&urls[0], &want);
    wait_counts(&urls[1], &want);
    println!(
        "live writes: {acked} batches acknowledged of {}, {} without an answer",
        batches.len(),
        batches.iter().filter(|o| **o == Outcome::Unknown).count()
    );
    check_batches(&t.pods[0], &batches);
    assert_eq!(own_tables(&t.pods[1]), "0");
    assert_eq!(
        t.pods[1]
            .sql("SELECT count() FROM sluice_series FORMAT TSV")
            .trim(),
        "0"
    );
    for table in ["s_autogen_cpu", "s_autogen_mem", "live_autogen_w"] {
        let dup = t.pods[0].sql(&format!(
            "SELECT count() - uniqExact(series_id, time) FROM {table} FORMAT TSV"
        ));
        assert_eq!(dup.trim(), "0", "{table} has rows twice");
    }
    // The leaving pod stays out of service until it is removed or cancelled.
    assert_eq!(t.pods[1].write("db=s", "cpu,host=x v=1 1").status, 503);

    // Without the leaving pod, the pod that stays answers alone, with everything.
    t.set_peers(&t.addresses()[..1]);
    std::thread::sleep(Duration::from_millis(1100));
    wait_counts(&urls[0], &want);
    check_batches(&t.pods[0], &batches);
}

#[test]
fn a_refused_hand_off_says_why_and_cancelling_it_loses_and_doubles_nothing() {
    let mut state = seed().max(1);
    let t = Tenant::start(
        2,
        &[
            ("SLUICE_CLUSTER_HANDOFF_CHUNK_ROWS", "5000"),
            ("SLUICE_LIMITS_PRETOUCH_BYTES", "0"),
        ],
    );
    let urls: Vec<String> = t.pods.iter().map(|p| p.url.clone()).collect();
    let want = write_static(&t, 20_000, &mut state);
    // The same field with a float on one pod and an integer on the other: the receiver cannot
    // store the leaving pod's rows as they are. Last by name, so the others go first.
    assert_eq!(t.pods[0].write("db=s", "zconflict x=1.5 1").status, 204);
    assert_eq!(t.pods[1].write("db=s", "zconflict x=2i 1").status, 204);
    wait_counts(&urls[0], &want);

    let to = t.addresses()[0].clone();
    let bad = decommission(&t.pods[1], "a,b:1");
    assert_eq!(bad.status, 400, "{}", bad.body);
    // Pointed at itself: refused, nothing moves; then pointed at the pod that stays.
    let itself = decommission(&t.pods[1], &t.addresses()[1]);
    assert_eq!(itself.status, 202, "{}", itself.body);
    let s = wait_phase(&t.pods[1], "refused", Duration::from_secs(60));
    assert!(
        s["handoff"]["refused"]
            .as_str()
            .is_some_and(|w| w.contains("cannot hand its data to itself")),
        "{s}"
    );
    let started = decommission(&t.pods[1], &to);
    assert_eq!(started.status, 202, "{}", started.body);
    let deadline = Instant::now() + Duration::from_secs(120);
    let s = loop {
        let s = status(&t.pods[1]);
        if s["handoff"]["refused"].is_string() {
            break s;
        }
        assert!(Instant::now() < deadline, "no refusal: {s}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let why = s["handoff"]["refused"].as_str().unwrap();
    assert!(
        why.contains("s_autogen_zconflict") && why.contains("fields x"),
        "{why}"
    );
    assert_eq!(s["handoff"]["tables_handed"], 3, "{s}");
    // Mid-way, reads are exact through either pod, InfluxQL and /sql across the tenant alike
    // (three tables are on the receiver, not yet settled, and still listed on the leaving
    // pod; the refused one is on the leaving pod only). /sql with merge(), which reads
    // tables past the filters that make that so, waits instead.
    wait_counts(&urls[0], &want);
    wait_counts(&urls[1], &want);
    for url in &urls {
        for &(m, n, sum) in &want {
            let (c, s) = sql_count_sum(url, "s", m).unwrap();
            assert!(
                c == n && (s - sum).abs() < 1e-6,
                "{m} through {url}: ({c}, {s}), want ({n}, {sum})"
            );
        }
    }
    let busy = t.pods[0].request(
        "POST",
        "/sql",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        serde_urlencoded::to_string([
            ("inner", "SELECT count() AS c FROM merge('^s_autogen_cpu$')"),
            ("q", "SELECT sum(c) FROM tenant FORMAT TSV"),
        ])
        .unwrap()
        .as_bytes(),
    );
    assert_eq!(busy.status, 503, "{}", busy.body);
    assert_eq!(busy.header("Retry-After"), Some("1"));
    assert!(busy.body.contains("merge()"), "{}", busy.body);

    cancel_and_wait_ready(&t.pods[1]);
    // The handed tables are the receiver's now; the refused one stayed here.
    assert_eq!(own_tables(&t.pods[1]), "1");
    wait_counts(&urls[0], &want);
    wait_counts(&urls[1], &want);
    std::thread::sleep(Duration::from_millis(1100));
    let settled = tenant_count(&t.pods[0], "s_autogen_cpu");
    assert_eq!(settled.status, 200, "{}", settled.body);
    assert_eq!(settled.body.trim(), want[0].1.to_string());
    // The pod takes writes again, and they count once.
    assert_eq!(
        t.pods[1]
            .write("db=s", "cpu,host=back v=1000 1800000000000000000")
            .status,
        204
    );
    let (m, n, sum) = want[0];
    let more = vec![(m, n + 1, sum + 1000.0)];
    wait_counts(&urls[0], &more);
    wait_counts(&urls[1], &more);
}

/// A small file system of its own (tmpfs), unmounted when dropped; `None` where this process may
/// not mount one (not root).
struct SmallVolume(std::path::PathBuf, tempfile::TempDir);

impl SmallVolume {
    fn mount(size: &str) -> Option<SmallVolume> {
        let dir = tempfile::tempdir().ok()?;
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return None;
        }
        let data = dir.path().join("data");
        let v = SmallVolume(data.clone(), dir);
        std::fs::create_dir(&data).ok()?;
        Some(v)
    }
}

impl Drop for SmallVolume {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.1.path())
            .status();
    }
}

#[test]
fn a_receiver_without_room_refuses_and_the_pod_keeps_its_data() {
    // The receiving pod on a 24 MiB volume, the leaving pod holding more than fits there.
    let Some(small) = SmallVolume::mount("24m") else {
        println!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    };
    let recv_dir = small.0.clone();
    let t = Tenant::start_with(2, &[("SLUICE_LIMITS_PRETOUCH_BYTES", "0")], |i| {
        (i == 0).then(|| recv_dir.clone())
    });
    let mut state = seed().max(1);
    let mut rows = 0u64;
    for b in 0..20 {
        let body: String = (0..1500)
            .map(|i| {
                let text: String = (0..1000)
                    .map(|_| char::from(b'a' + (next(&mut state) % 26) as u8))
                    .collect();
                format!(
                    "blob,k=k{} s=\"{text}\" {}\n",
                    i % 10,
                    1_700_000_000_000_000_000u64 + b * 10_000 + i
                )
            })
            .collect();
        let w = t.pods[1].write("db=s", &body);
        assert_eq!(w.status, 204, "{}", w.body);
        rows += 1500;
    }
    let count = |pod: &Server| {
        pod.sql("SELECT count() FROM s_autogen_blob FORMAT TSV")
            .trim()
            .parse::<u64>()
            .unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while count(&t.pods[1]) != rows {
        assert!(Instant::now() < deadline, "not flushed");
        std::thread::sleep(Duration::from_millis(100));
    }
    let started = decommission(&t.pods[1], &t.addresses()[0]);
    assert_eq!(started.status, 202, "{}", started.body);
    let s = wait_phase(&t.pods[1], "refused", Duration::from_secs(60));
    let why = s["handoff"]["refused"].as_str().unwrap_or_default();
    assert!(why.contains("bytes free on the data volume"), "{s}");
    // Nothing moved: the receiver holds none of it, the leaving pod all of it.
    assert_eq!(
        t.pods[0]
            .sql("SELECT count() FROM system.tables WHERE name = 's_autogen_blob' FORMAT TSV")
            .trim(),
        "0"
    );
    assert_eq!(count(&t.pods[1]), rows);
    cancel_and_wait_ready(&t.pods[1]);
    assert_eq!(count(&t.pods[1]), rows);
    drop(t);
}

/// `sum("v")` of `cpu` where `host` is `h`, read through `pod` (0 without points).
fn host_sum(pod: &Server, h: &str) -> f64 {
    let q = format!("SELECT sum(\"v\") FROM \"cpu\" WHERE \"host\" = '{h}'");
    let path = format!(
        "/query?db=s&{}",
        serde_urlencoded::to_string([("q", q.as_str())]).unwrap()
    );
    let r = pod.request("GET", &path, &[], b"");
    assert_eq!(r.status, 200, "{}", r.body);
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert!(v["results"][0]["error"].is_null(), "{v}");
    v["results"][0]["series"][0]["values"][0][1]
        .as_f64()
        .unwrap_or(0.0)
}

#[test]
fn a_series_received_in_a_hand_off_is_in_the_receivers_reads_by_tag() {
    let t = Tenant::start(2, &[("SLUICE_LIMITS_PRETOUCH_BYTES", "0")]);
    for pod in &t.pods {
        assert_eq!(
            pod.write("db=s", "cpu,host=both v=1 1700000000000000000\n")
                .status,
            204
        );
    }
    // A series only the leaving pod holds.
    assert_eq!(
        t.pods[1]
            .write("db=s", "cpu,host=solo v=5 1700000000000000000\n")
            .status,
        204
    );
    t.pods[0].wait_sql("SELECT count() FROM sluice_series", "1");
    t.pods[1].wait_sql("SELECT count() FROM sluice_series", "2");
    t.pods[1].wait_sql("SELECT count() FROM s_autogen_cpu", "2");
    // Twice: the receiver's share of the second read names the ids its first remembered
    // (none of its own).
    for _ in 0..2 {
        assert_eq!(host_sum(&t.pods[0], "solo"), 5.0);
    }
    let started = decommission(&t.pods[1], &t.addresses()[0]);
    assert_eq!(started.status, 202, "{}", started.body);
    wait_phase(&t.pods[1], "empty", Duration::from_secs(120));
    // The receiver alone, reading the series it received: its remembered set is stale.
    t.set_peers(&t.addresses()[..1]);
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(host_sum(&t.pods[0], "solo"), 5.0);
    assert_eq!(host_sum(&t.pods[0], "both"), 2.0);
}

/// A pod that computed its own share inside its gathering query, planned while it took part
/// in no hand-off, reads again when it starts leaving during the read: its share may have
/// counted rows it was about to hand over. Pod 2 is stopped so that pod 0's read waits on it
/// while pod 0 is decommissioned; pod 2 resumed, the read answers every row once, read
/// again (`read_retries_total{reason="stale_handoff_view"}`).
#[test]
fn a_hand_off_begun_during_a_read_makes_it_read_again() {
    let t = Tenant::start(3, &[("SLUICE_LIMITS_PRETOUCH_BYTES", "0")]);
    let counts = common::tenant::write_doubling(&t.pods);
    let per_host = "SELECT count(value) FROM cpu WHERE time >= 1599998400s AND time < 1600002000s GROUP BY time(1h), host";
    let path = format!(
        "{}/query?db=g&{}",
        t.pods[0].url,
        serde_urlencoded::to_string([("q", per_host)]).unwrap()
    );
    let read = move || -> Value {
        let r = ureq::get(&path)
            .timeout(Duration::from_secs(60))
            .call()
            .expect("read");
        serde_json::from_str(&r.into_string().expect("body")).expect("JSON")
    };
    let counted = |v: &Value| -> Vec<u64> {
        v["results"][0]["series"]
            .as_array()
            .map(|s| {
                s.iter()
                    .filter_map(|s| s["values"][0][1].as_u64())
                    .collect()
            })
            .unwrap_or_default()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while counted(&read()) != counts {
        assert!(Instant::now() < deadline, "{}", read());
        std::thread::sleep(Duration::from_millis(100));
    }
    let before = read_retries(&t.pods[0], "stale_handoff_view");

    let stopped = t.pods[2].pid().expect("running").to_string();
    let signal = |sig: &str| {
        let s = std::process::Command::new("kill")
            .args([sig, stopped.as_str()])
            .status()
            .expect("kill");
        assert!(s.success());
    };
    // The catalog was gathered by the read above, less than a second ago: the next read
    // plans without pod 2 and waits on it for its share.
    read();
    signal("-STOP");
    let reader = std::thread::spawn(read.clone());
    std::thread::sleep(Duration::from_millis(1000));
    let to = t.addresses()[1].clone();
    let d = decommission(&t.pods[0], &to);
    assert_eq!(d.status, 202, "{}", d.body);
    std::thread::sleep(Duration::from_millis(200));
    signal("-CONT");
    let v = reader.join().expect("reader");
    assert_eq!(counted(&v), counts, "{v}");
    assert!(
        read_retries(&t.pods[0], "stale_handoff_view") > before,
        "the read planned before the hand-off was not read again: {v}"
    );
    wait_phase(&t.pods[0], "empty", Duration::from_secs(60));
    assert_eq!(counted(&read()), counts);
}
