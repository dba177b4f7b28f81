//! A tenant of several real server processes on 127.0.0.1 that gather from each other.

use std::io::Write;

use super::Server;

pub const TOKEN: &str = "tenant-secret";

/// Three servers that gather from each other through a peer file (as the operator mounts
/// it), with `env` added.
pub struct Tenant {
    pub pods: Vec<Server>,
    peers_file: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Tenant {
    pub fn start(n: usize, env: &[(&str, &str)]) -> Tenant {
        Self::start_with(n, env, |_| None)
    }

    /// As [`Tenant::start`], pod `i` on the data directory `data_dir(i)` when it names one.
    pub fn start_with(
        n: usize,
        env: &[(&str, &str)],
        data_dir: impl Fn(usize) -> Option<std::path::PathBuf>,
    ) -> Tenant {
        let dir = tempfile::tempdir().expect("temp dir");
        let peers_file = dir.path().join("peers");
        let file = peers_file.display().to_string();
        let mut all: Vec<(&str, &str)> = vec![
            ("SLUICE_CLUSTER_PEERS_FILE", &file),
            ("SLUICE_CLUSTER_TOKEN", TOKEN),
        ];
        all.extend_from_slice(env);
        let pods: Vec<Server> = (0..n)
            .map(|i| match data_dir(i) {
                Some(d) => Server::start_in(&d, &all),
                None => Server::start(&all),
            })
            .collect();
        let t = Tenant {
            pods,
            peers_file,
            _dir: dir,
        };
        t.set_peers(&t.addresses());
        t
    }

    pub fn addresses(&self) -> Vec<String> {
        self.pods
            .iter()
            .map(|p| p.url.trim_start_matches("http://").to_string())
            .collect()
    }

    pub fn set_peers(&self, peers: &[String]) {
        let tmp = self.peers_file.with_extension("tmp");
        let mut f = std::fs::File::create(&tmp).expect("peer file");
        writeln!(f, "{}", peers.join("\n")).expect("write peer file");
        drop(f);
        std::fs::rename(&tmp, &self.peers_file).expect("replace peer file");
    }
}

/// Writes 10, 20, 40, ... points (`cpu,host=p<i> value=0..n`, a second apart from
/// 1,600,000,000 s) to pod `i` of `pods`, in database `g`: how many each pod holds tells
/// whose share an answer counted. Returns those counts.
pub fn write_doubling(pods: &[Server]) -> Vec<u64> {
    let mut counts = Vec::new();
    for (i, pod) in pods.iter().enumerate() {
        let n = 10u64 << i;
        let body: Vec<String> = (0..n)
            .map(|k| format!("cpu,host=p{i} value={k} {}", 1_600_000_000 + k))
            .collect();
        let w = pod.write("db=g&precision=s", &body.join("\n"));
        assert_eq!(w.status, 204, "{}", w.body);
        counts.push(n);
    }
    counts
}

/// `sluice_read_retries_total{reason}` of `pod`: its reads across the tenant run again.
pub fn read_retries(pod: &Server, reason: &str) -> u64 {
    let metrics = pod.request("GET", "/metrics", &[], b"").body;
    let line = format!("sluice_read_retries_total{{reason=\"{reason}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(line.as_str())?.parse::<f64>().ok())
        .unwrap_or(0.0) as u64
}

/// The test's seed, printed, so a failure can be run again with the same spread.
pub fn seed() -> u64 {
    let seed = super::test_seed();
    println!("seed {seed} (SLUICE_TEST_SEED={seed} repeats this spread)");
    seed
}

/// xorshift64*: enough to spread lines, and the same for a seed on every machine.
pub fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_F491_4F6C_DD1D)
}
