//! What a hand-off has done, kept on the data volume so that a pod killed at any moment (or
//! restarted) resumes it where it stopped: the leaving pod's progress, and the hand-offs a
//! receiving pod has begun and not yet settled. Each is one small JSON file replaced whole
//! (written aside, synced, renamed, directory synced), so a reader sees the old state or the
//! new, never half of one.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The leaving pod's progress.
pub const LEAVING_FILE: &str = "decommission.json";
/// The hand-offs this pod receives and has not settled.
pub const RECEIVING_FILE: &str = "handoffs-received.json";

/// Where a leaving pod is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Writes refused, the WAL flushing (and, without a receiver, staying there).
    Draining,
    /// Copying the series rows and then table after table to the receiver.
    Handing,
    /// Every table handed over and dropped here: settling the hand-off with the receiver.
    Finishing,
    /// Nothing left here; the pod can be removed.
    Empty,
    /// Going back to taking writes with what the pod still holds.
    Cancelling,
}

/// A range of series ids of one table, copied and checked as a unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk {
    pub lo: u64,
    pub hi: u64,
    /// The rows the range holds here.
    pub rows: u64,
    pub done: bool,
}

/// One table's hand-off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableProgress {
    pub db: String,
    pub rp: String,
    pub measurement: String,
    /// The policy's duration in nanoseconds (0: infinite), for a receiver without the database.
    pub duration_ns: u64,
    /// Field name to InfluxDB type name, as this pod holds them.
    pub fields: Vec<(String, String)>,
    /// Empty until the table is planned.
    pub chunks: Vec<Chunk>,
    /// Copied, and the receiver's copy checked equal: from here reads count the receiver's
    /// copy, never this pod's.
    pub handed: bool,
    pub dropped: bool,
}

impl TableProgress {
    pub fn rows(&self) -> u64 {
        self.chunks.iter().map(|c| c.rows).sum()
    }

    pub fn rows_done(&self) -> u64 {
        self.chunks.iter().filter(|c| c.done).map(|c| c.rows).sum()
    }
}

/// A leaving pod's whole state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leaving {
    /// This hand-off's id: the receiver marks the rows it copies with it.
    pub id: u64,
    pub since_unix_seconds: u64,
    /// `host:port` of the pod that receives the data; `None` only drains.
    pub receiver: Option<String>,
    pub step: Step,
    pub series_copied: bool,
    /// Listed when handing starts, by table name.
    pub tables: BTreeMap<String, TableProgress>,
    /// Why the receiver cannot take the data (then nothing is copied until a new request).
    pub refused: Option<String>,
}

impl Leaving {
    pub fn new(id: u64, since_unix_seconds: u64, receiver: Option<String>) -> Self {
        Self {
            id,
            since_unix_seconds,
            receiver,
            step: Step::Draining,
            series_copied: false,
            tables: BTreeMap::new(),
            refused: None,
        }
    }

    /// The tables handed over (the receiver's copy is the one that counts).
    pub fn handed(&self) -> BTreeSet<String> {
        self.tables
            .iter()
            .filter(|(_, t)| t.handed)
            .map(|(n, _)| n.clone())
            .collect()
    }
}

/// Reads `file` in `dir`; `None` when it does not exist.
pub fn load<T: for<'de> Deserialize<'de>>(dir: &Path, file: &str) -> std::io::Result<Option<T>> {
    let path = dir.join(file);
    match std::fs::read(&path) {
        Ok(raw) => serde_json::from_slice(&raw).map(Some).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Replaces `file` in `dir` with `value`, durably.
pub fn save<T: Serialize>(dir: &Path, file: &str, value: &T) -> std::io::Result<()> {
    let tmp = dir.join(format!("{file}.tmp"));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, dir.join(file))?;
    std::fs::File::open(dir)?.sync_all()
}

/// Removes `file` in `dir`, durably.
pub fn remove(dir: &Path, file: &str) -> std::io::Result<()> {
    match std::fs::remove_file(dir.join(file)) {
        Ok(()) => std::fs::File::open(dir)?.sync_all(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_survives_a_round_trip_and_replacement() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load::<Leaving>(dir.path(), LEAVING_FILE).unwrap(), None);
        let mut l = Leaving::new(7, 1, Some("p-0:8086".into()));
        l.tables.insert(
            "db_autogen_cpu".into(),
            TableProgress {
                db: "db".into(),
                rp: "autogen".into(),
                measurement: "cpu".into(),
                duration_ns: 0,
                fields: vec![("v".into(), "float".into())],
                chunks: vec![Chunk {
                    lo: 0,
                    hi: u64::MAX,
                    rows: 3,
                    done: true,
                }],
                handed: true,
                dropped: false,
            },
        );
        save(dir.path(), LEAVING_FILE, &l).unwrap();
        assert_eq!(
            load::<Leaving>(dir.path(), LEAVING_FILE).unwrap(),
            Some(l.clone())
        );
        assert_eq!(l.handed().len(), 1);
        l.step = Step::Empty;
        save(dir.path(), LEAVING_FILE, &l).unwrap();
        assert_eq!(
            load::<Leaving>(dir.path(), LEAVING_FILE)
                .unwrap()
                .unwrap()
                .step,
            Step::Empty
        );
        remove(dir.path(), LEAVING_FILE).unwrap();
        remove(dir.path(), LEAVING_FILE).unwrap();
        assert_eq!(load::<Leaving>(dir.path(), LEAVING_FILE).unwrap(), None);
    }
}
