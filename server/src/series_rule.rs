//! The rule a data directory's series ids were made under (`series.cluster_tag`), recorded in
//! the directory so that a server never writes under another: the same series would get a
//! second id, and every read grouping by series would count it twice.

use std::io::Write;
use std::path::Path;

use sluice_core::config::SeriesConfig;

/// The file in the data directory holding the rule.
pub const FILE: &str = "series-ids";

#[derive(Debug, thiserror::Error)]
pub enum SeriesRuleError {
    #[error(
        "{path} records series ids made as {recorded}, but the configuration asks for \
         {configured}: series.cluster_tag is fixed for a data directory's life (start with a \
         new data directory, or set it back)"
    )]
    Changed {
        path: String,
        recorded: String,
        configured: String,
    },
    #[error("cannot read or write {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// How a rule is written in the file and named in errors.
pub fn describe(cfg: &SeriesConfig) -> String {
    match &cfg.cluster_tag {
        None => "plain".into(),
        Some(tag) => format!("cluster_tag={tag}"),
    }
}

/// Records the configured rule in a new data directory, or checks it against the recorded one.
/// A directory written before the rule was recorded (it holds a WAL or chDB data) was written
/// with plain ids. Call before anything else creates files in `data`.
pub fn check(data: &Path, cfg: &SeriesConfig) -> Result<(), SeriesRuleError> {
    let path = data.join(FILE);
    let io = |source| SeriesRuleError::Io {
        path: path.display().to_string(),
        source,
    };
    let configured = describe(cfg);
    let recorded = match std::fs::read_to_string(&path) {
        Ok(text) => text.trim_end_matches('\n').to_string(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let earlier = data.join("wal").exists() || data.join("chdb").exists();
            let recorded = if earlier {
                describe(&SeriesConfig::default())
            } else {
                configured.clone()
            };
            write_durably(data, &path, &recorded).map_err(io)?;
            recorded
        }
        Err(e) => return Err(io(e)),
    };
    if recorded != configured {
        return Err(SeriesRuleError::Changed {
            path: path.display().to_string(),
            recorded,
            configured,
        });
    }
    Ok(())
}

fn write_durably(dir: &Path, path: &Path, rule: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(format!("{rule}\n").as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clustered(tag: &str) -> SeriesConfig {
        SeriesConfig {
            cluster_tag: Some(tag.into()),
        }
    }

    #[test]
    fn a_new_directory_records_the_rule_and_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        check(dir.path(), &clustered("region")).unwrap();
        check(dir.path(), &clustered("region")).unwrap();
        let err = check(dir.path(), &clustered("dc")).unwrap_err().to_string();
        assert!(err.contains("cluster_tag=region"), "{err}");
        assert!(err.contains("cluster_tag=dc"), "{err}");
        assert!(check(dir.path(), &SeriesConfig::default()).is_err());
    }

    #[test]
    fn a_directory_of_an_earlier_version_holds_plain_ids() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("wal")).unwrap();
        let err = check(dir.path(), &clustered("region")).unwrap_err();
        assert!(err.to_string().contains("as plain"), "{err}");
        check(dir.path(), &SeriesConfig::default()).unwrap();
    }
}
