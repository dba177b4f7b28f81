//! Crash safety: clients write while the server is killed with SIGKILL at random moments and
//! restarted. Afterwards every acknowledged point is in chDB exactly once, and every point in
//! chDB was sent. A request whose connection died before its answer is "in doubt": the server
//! may or may not have committed it, and either is correct, but never twice.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Server;

const KILLS: usize = 12;
const WRITERS: u64 = 3;
const POINTS_PER_REQUEST: u64 = 200;

/// A small deterministic generator, so a failing run can be reproduced from its seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[derive(Default)]
struct Ledger {
    acked: HashSet<u64>,
    in_doubt: HashSet<u64>,
}

#[test]
fn sigkill_at_random_moments_loses_and_duplicates_nothing() {
    let seed = common::test_seed();
    eprintln!("crash test seed {seed} (set SLUICE_TEST_SEED to repeat)");
    let mut rng = Rng(seed);
    // Small batches and a short interval so that flushes (and their intents) are in progress
    // when the kills land.
    let mut server = Server::start(&[
        ("SLUICE_POOL_MAX_POINTS_PER_BATCH", "500"),
        ("SLUICE_POOL_FLUSH_INTERVAL", "20ms"),
    ]);
    let url = Arc::new(Mutex::new(server.url.clone()));
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let next_id = Arc::new(AtomicU64::new(0));

    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (url, ledger, stop, next_id) =
                (url.clone(), ledger.clone(), stop.clone(), next_id.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let first = next_id.fetch_add(POINTS_PER_REQUEST, Ordering::Relaxed);
                    let ids: Vec<u64> = (first..first + POINTS_PER_REQUEST).collect();
                    let body: String = ids
                        .iter()
                        .map(|id| {
                            format!("crash,w={w},s={} id={id}i {}\n", id % 50, 1_000_000 + id)
                        })
                        .collect();
                    let u = url.lock().unwrap().clone();
                    let r = ureq::post(&format!("{u}/write?db=crash"))
                        .timeout(Duration::from_secs(10))
                        .send_string(&body);
                    let mut l = ledger.lock().unwrap();
                    match r {
                        Ok(resp) if resp.status() == 204 => l.acked.extend(ids),
                        // Refused before anything was committed (not ready yet, queue full).
                        Err(ureq::Error::Status(503, _)) => {}
                        Err(ureq::Error::Status(code, resp)) => {
                            panic!(
                                "unexpected {code}: {}",
                                resp.into_string().unwrap_or_default()
                            )
                        }
                        Ok(resp) => panic!("unexpected {}", resp.status()),
                        // The connection died: the server may have committed it.
                        Err(_) => {
                            l.in_doubt.extend(ids);
                            drop(l);
                            std::thread::sleep(Duration::from_millis(20));
                        }
                    }
                }
            })
        })
        .collect();

    for k in 0..KILLS {
        let wait = Duration::from_millis(200 + rng.next() % 1300);
        std::thread::sleep(wait);
        let before = ledger.lock().unwrap().acked.len();
        server.kill();
        eprintln!(
            "kill {}/{KILLS} after {wait:?}: {before} points acknowledged so far",
            k + 1
        );
        server.restart();
        *url.lock().unwrap() = server.url.clone();
    }
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().expect("writer thread");
    }
    // One last kill after the writers stop, so the final state comes from a replay.
    server.restart();

    let ledger = ledger.lock().unwrap();
    assert!(
        ledger.acked.len() > 1000,
        "too few writes got through: {}",
        ledger.acked.len()
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let counts: HashMap<u64, u64> = loop {
        let out = server.sql("SELECT id, count() FROM crash_autogen_crash GROUP BY id FORMAT TSV");
        let counts: HashMap<u64, u64> = out
            .lines()
            .filter_map(|l| {
                let (a, b) = l.split_once('\t')?;
                Some((a.parse().ok()?, b.parse().ok()?))
            })
            .collect();
        if ledger.acked.iter().all(|id| counts.contains_key(id)) || Instant::now() > deadline {
            break counts;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let lost: Vec<_> = ledger
        .acked
        .iter()
        .filter(|id| !counts.contains_key(id))
        .take(10)
        .collect();
    assert!(
        lost.is_empty(),
        "acknowledged points missing, e.g. {lost:?}; server log:\n{}",
        server.log_tail()
    );
    let dup: Vec<_> = counts.iter().filter(|(_, c)| **c != 1).take(10).collect();
    assert!(dup.is_empty(), "points stored more than once, e.g. {dup:?}");
    let unknown: Vec<_> = counts
        .keys()
        .filter(|id| !ledger.acked.contains(id) && !ledger.in_doubt.contains(id))
        .take(10)
        .collect();
    assert!(unknown.is_empty(), "points nobody sent: {unknown:?}");
    let in_doubt_present = ledger
        .in_doubt
        .iter()
        .filter(|id| counts.contains_key(id))
        .count();
    eprintln!(
        "acknowledged {}, in doubt {} ({} of them committed), stored {}",
        ledger.acked.len(),
        ledger.in_doubt.len(),
        in_doubt_present,
        counts.len()
    );
    // Series dimension rows are complete too: 3 writers x 50 series.
    server.wait_sql(
        "SELECT uniqExact(series_id) FROM sluice_series WHERE db = 'crash'",
        &(WRITERS * 50).to_string(),
    );
}
