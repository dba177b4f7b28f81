//! Runs the real `sluice-server` binary on a free port with its own data directory, and talks
//! to it over HTTP. Every integration test goes through this: real chDB, real RocksDB.
#![allow(dead_code)]

pub mod generated;
pub mod influxd;
pub mod influxql;
pub mod tenant;

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Server {
    child: Option<Child>,
    pub url: String,
    pub dir: PathBuf,
    env: Vec<(String, String)>,
    listen: String,
    _tmp: Option<tempfile::TempDir>,
}

pub struct Resp {
    pub status: u16,
    pub body: String,
    pub headers: Vec<(String, String)>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Server {
    /// A server on a fresh data directory with `env` as extra `SLUICE_*` settings.
    pub fn start(env: &[(&str, &str)]) -> Server {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().to_path_buf();
        let mut s = Server::start_in(&dir, env);
        s._tmp = Some(tmp);
        s
    }

    /// A server on `dir` (which may hold data from an earlier run).
    pub fn start_in(dir: &Path, env: &[(&str, &str)]) -> Server {
        Server::start_in_at(dir, &format!("127.0.0.1:{}", free_port()), env)
    }

    /// A server on a fresh data directory listening on `listen`, known before it starts
    /// (for a peer file that names it).
    pub fn start_at(listen: &str, env: &[(&str, &str)]) -> Server {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().to_path_buf();
        let mut s = Server::start_in_at(&dir, listen, env);
        s._tmp = Some(tmp);
        s
    }

    fn start_in_at(dir: &Path, listen: &str, env: &[(&str, &str)]) -> Server {
        let listen = listen.to_string();
        let mut s = Server {
            child: None,
            url: format!("http://{listen}"),
            dir: dir.to_path_buf(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            listen,
            _tmp: None,
        };
        s.spawn();
        s.wait_ready(Duration::from_secs(120));
        s
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("server.log"))
            .expect("log file");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice-server"));
        cmd.arg("--listen")
            .arg(&self.listen)
            .arg("--data-dir")
            .arg(&self.dir)
            .env("SLUICE_POOL_FLUSH_INTERVAL", "100ms")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log));
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        self.child = Some(cmd.spawn().expect("start sluice-server"));
    }

    pub fn wait_ready(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    panic!("sluice-server exited with {status}: {}", self.log_tail());
                }
            }
            if let Ok(r) = ureq::get(&format!("{}/ready", self.url))
                .timeout(Duration::from_secs(2))
                .call()
            {
                if r.status() == 200 {
                    return;
                }
            }
            if Instant::now() > deadline {
                panic!(
                    "sluice-server not ready after {timeout:?}: {}",
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The running server's environment, as the kernel has it (`/proc/<pid>/environ`).
    pub fn environ(&self) -> Vec<String> {
        let pid = self.child.as_ref().expect("server running").id();
        std::fs::read(format!("/proc/{pid}/environ"))
            .expect("environ")
            .split(|b| *b == 0)
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect()
    }

    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// The server's resident memory (VmRSS), in bytes.
    pub fn rss(&self) -> u64 {
        let pid = self.pid().expect("server running");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    }

    /// Whether the process is still alive and answers `/health`.
    pub fn is_up(&self) -> bool {
        self.request("GET", "/health", &[], b"").status == 200
    }

    /// SIGKILL: no flush, no clean close.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then waits for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("server running");
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(c.id().to_string())
            .status();
        c.wait().expect("wait for sluice-server")
    }

    /// SIGKILL and start again, waiting only until it answers `/health` (a pod that resumes a
    /// decommission never becomes ready).
    pub fn respawn(&mut self) {
        self.kill();
        self.spawn();
        let deadline = Instant::now() + Duration::from_secs(120);
        while !self.is_up_quietly() {
            assert!(Instant::now() < deadline, "not up: {}", self.log_tail());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn is_up_quietly(&self) -> bool {
        ureq::get(&format!("{}/health", self.url))
            .timeout(Duration::from_secs(2))
            .call()
            .is_ok_and(|r| r.status() == 200)
    }

    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
        self.wait_ready(Duration::from_secs(120));
    }

    pub fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
        let mut req = ureq::request(method, &format!("{}{}", self.url, path))
            .timeout(Duration::from_secs(60));
        for (k, v) in headers {
            req = req.set(k, v);
        }
        let result = if method == "GET" || method == "HEAD" {
            req.call()
        } else {
            req.send_bytes(body)
        };
        let resp = match result {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{method} {path}: {e}"),
        };
        let status = resp.status();
        let headers = resp
            .headers_names()
            .into_iter()
            .filter_map(|n| resp.header(&n).map(|v| (n.clone(), v.to_string())))
            .collect();
        let mut body = String::new();
        let _ = resp.into_reader().read_to_string(&mut body);
        Resp {
            status,
            body,
            headers,
        }
    }

    pub fn write(&self, query: &str, body: &str) -> Resp {
        self.request("POST", &format!("/write?{query}"), &[], body.as_bytes())
    }

    /// Runs SQL and returns the body; panics on a non-200 answer.
    pub fn sql(&self, q: &str) -> String {
        let r = self.request("POST", "/sql", &[], q.as_bytes());
        assert_eq!(r.status, 200, "{q}: {}", r.body);
        r.body
    }

    /// Waits until `q` (a single value, TSV) returns `want`, for data still being flushed.
    pub fn wait_sql(&self, q: &str, want: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut got = String::new();
        while Instant::now() < deadline {
            got = self.sql(&format!("{q} FORMAT TSV"));
            if got.trim() == want {
                return got;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("{q}: wanted {want:?}, last got {:?}", got.trim());
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A random test's seed: `SLUICE_TEST_SEED` when set (to repeat a failure), else from the
/// clock; odd, so that xorshift generators never start at zero.
pub fn test_seed() -> u64 {
    std::env::var("SLUICE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(7)
        })
        | 1
}

/// A free TCP port on 127.0.0.1 (for other processes the tests start).
pub fn any_free_port() -> u16 {
    free_port()
}

/// One HTTP request to `base` (`http://host:port`) with the same handling as
/// [`Server::request`], for servers that are not sluice (a reference InfluxDB).
pub fn http_request(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Resp, String> {
    let mut req = ureq::request(method, &format!("{base}{path}")).timeout(Duration::from_secs(60));
    for (k, v) in headers {
        req = req.set(k, v);
    }
    let result = if method == "GET" || method == "HEAD" {
        req.call()
    } else {
        req.send_bytes(body)
    };
    let resp = match result {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => return Err(format!("{method} {base}{path}: {e}")),
    };
    let status = resp.status();
    let headers = resp
        .headers_names()
        .into_iter()
        .filter_map(|n| resp.header(&n).map(|v| (n.clone(), v.to_string())))
        .collect();
    let mut body = String::new();
    resp.into_reader()
        .read_to_string(&mut body)
        .map_err(|e| format!("{method} {base}{path}: reading the answer: {e}"))?;
    Ok(Resp {
        status,
        body,
        headers,
    })
}

/// A Go tool that `scripts/install-go-tools` builds: `$<env_var>` when set, else
/// `$SLUICE_CACHE/bin/<name>` (default `~/.cache/sluice/bin/<name>`). Panics, naming the
/// script, when it is missing: the tests that need it must fail, not pass by skipping.
pub fn go_tool(name: &str, env_var: &str) -> PathBuf {
    let path = match std::env::var_os(env_var) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => {
            let cache = match std::env::var_os("SLUICE_CACHE") {
                Some(c) if !c.is_empty() => PathBuf::from(c),
                _ => {
                    let home = std::env::var_os("HOME").expect("HOME or SLUICE_CACHE must be set");
                    PathBuf::from(home).join(".cache/sluice")
                }
            };
            cache.join("bin").join(name)
        }
    };
    if !path.is_file() {
        panic!(
            "{name} not found at {} (set {env_var} to override): run scripts/install-go-tools",
            path.display()
        );
    }
    path
}

/// Waits for `child` to exit, killing it after `timeout`. Returns its exit status, or an error
/// naming the timeout.
pub fn wait_child(
    child: &mut Child,
    timeout: Duration,
) -> Result<std::process::ExitStatus, String> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("still running after {timeout:?}; killed"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(format!("waiting for the process: {e}")),
        }
    }
}

/// Commits `batch` of `table` to `wal` as one entry and waits until it is durable (for tests
/// that drive the WAL and the flusher directly, without a server).
pub async fn commit_batch(
    wal: &sluice_server::wal::Wal,
    table: &str,
    batch: &sluice_core::MeasurementBatch,
) {
    wal.submit(vec![sluice_server::wal::Entry {
        table: table.into(),
        rows: batch.len() as u32,
        payload: sluice_server::payload::encode_measurement(batch),
        batch: None,
    }])
    .expect("submit")
    .await
    .expect("committer")
    .expect("commit");
}

struct NoObserver;
impl sluice_server::wal::CommitObserver for NoObserver {
    fn group_committed(&self, _: usize, _: u64, _: f64) {}
}

/// A WAL in `dir` whose commits go nowhere (no scheduler): tests drive the flusher themselves.
pub fn open_wal(dir: &Path) -> std::sync::Arc<sluice_server::wal::Wal> {
    std::sync::Arc::new(
        sluice_server::wal::Wal::open(dir, 8, Box::new(|_| {}), std::sync::Arc::new(NoObserver))
            .expect("open the WAL"),
    )
}
