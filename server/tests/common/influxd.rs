//! A real InfluxDB 1.8 (`influxd`, built by `scripts/install-go-tools`; `$SLUICE_INFLUXD`
//! overrides the path) for the differential tests.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::Resp;

/// `max-body-size` of influxd and `SLUICE_LIMITS_MAX_BODY_BYTES` of sluice (64KiB) in the
/// tests that compare 413s.
pub const MAX_BODY: usize = 65536;

/// A real InfluxDB 1.8 on free ports in a temporary directory.
pub struct Influxd {
    child: Child,
    pub url: String,
    dir: tempfile::TempDir,
}

impl Influxd {
    pub fn start() -> Influxd {
        Self::start_with(MAX_BODY)
    }

    /// With `max-body-size` set to `max_body` bytes.
    pub fn start_with(max_body: usize) -> Influxd {
        let bin = super::go_tool("influxd", "SLUICE_INFLUXD");
        let dir = tempfile::tempdir().expect("temp dir for influxd");
        let http_port = super::any_free_port();
        let mut rpc_port = super::any_free_port();
        while rpc_port == http_port {
            rpc_port = super::any_free_port();
        }
        let d = dir.path().display();
        let config = format!(
            r#"reporting-disabled = true
bind-address = "127.0.0.1:{rpc_port}"

[meta]
  dir = "{d}/meta"

[data]
  dir = "{d}/data"
  wal-dir = "{d}/wal"
  query-log-enabled = false

[monitor]
  store-enabled = false

[continuous_queries]
  enabled = false

[http]
  bind-address = "127.0.0.1:{http_port}"
  auth-enabled = false
  log-enabled = false
  max-body-size = {max_body}
"#
        );
        let config_path = dir.path().join("influxdb.conf");
        std::fs::write(&config_path, config).expect("write influxdb.conf");
        let log = std::fs::File::create(dir.path().join("influxd.log")).expect("influxd log file");
        let log2 = log.try_clone().expect("influxd log file");
        let child = Command::new(&bin)
            .arg("run")
            .arg("-config")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log2))
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
        let mut influxd = Influxd {
            child,
            url: format!("http://127.0.0.1:{http_port}"),
            dir,
        };
        influxd.wait_ready(Duration::from_secs(60));
        influxd
    }

    fn wait_ready(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("influxd exited with {status}:\n{}", self.log_tail());
            }
            if let Ok(r) = super::http_request(&self.url, "GET", "/ping", &[], b"") {
                if r.status == 204 {
                    return;
                }
            }
            if Instant::now() > deadline {
                panic!("influxd not ready after {timeout:?}:\n{}", self.log_tail());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("influxd.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    pub fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
        super::http_request(&self.url, method, path, headers, body)
            .unwrap_or_else(|e| panic!("influxd: {e}\n{}", self.log_tail()))
    }
}

impl Drop for Influxd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
