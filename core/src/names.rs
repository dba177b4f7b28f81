//! Names that become parts of chDB table names.
//!
//! A table is `<db>_<rp>_<measurement>`. Databases and retention policies are declared by
//! operators (config, `CREATE DATABASE`, the CRD), so they are held to a conservative alphabet
//! that needs no escaping anywhere (file names, SQL, Kubernetes labels). Measurements come from
//! writers and may be any UTF-8; they are only ever used inside quoted identifiers, and are
//! bounded in length so that the table's metadata file name stays within filesystem limits.

/// Longest database or retention-policy name.
pub const MAX_NAME_LEN: usize = 64;
/// Longest measurement name, in bytes.
pub const MAX_MEASUREMENT_LEN: usize = 128;
/// Longest table name as chDB spells it in a file name (see [`file_name_len`]); filesystems
/// allow 255 bytes and chDB adds a suffix.
pub const MAX_TABLE_FILE_NAME_LEN: usize = 200;

/// Bytes a name takes as a chDB file name: letters, digits and `_` stay, every other byte
/// becomes `%XX`. A table whose metadata file name would exceed the filesystem's limit cannot
/// be created, so writers learn that up front instead of from an engine error.
pub fn file_name_len(name: &str) -> usize {
    name.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'_' {
                1
            } else {
                3
            }
        })
        .sum()
}

/// Why a measurement or field name cannot be a table or column name, if it cannot.
///
/// The engine refuses a NUL byte anywhere in a name ("Null byte found in identifier"), so a
/// line with one was acknowledged and then failed every flush of its table. Every other
/// character, control characters included, is stored and read back unchanged (the engine
/// test `names_round_trip` writes and reads each of them); only NUL is refused, at parse
/// time, for its line.
pub fn stored_name_problem(name: &str) -> Option<&'static str> {
    name.contains('\0')
        .then_some("contains a NUL byte, which table and column names cannot hold")
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("name is empty")]
    Empty,
    #[error("name is longer than {MAX_NAME_LEN} characters")]
    TooLong,
    #[error("name may contain only letters, digits, '_' and '-', and must start with a letter or '_'; found {0:?}")]
    BadChar(char),
}

/// The rule for database and retention-policy names (the CRD's schema carries the same
/// pattern: `^[A-Za-z_][A-Za-z0-9_-]{0,63}$`).
pub fn validate_name(name: &str) -> Result<(), NameError> {
    let mut chars = name.chars();
    let first = chars.next().ok_or(NameError::Empty)?;
    if name.len() > MAX_NAME_LEN {
        return Err(NameError::TooLong);
    }
    if !(first.is_ascii_alphabetic() || first == '_') {
        return Err(NameError::BadChar(first));
    }
    for c in chars {
        if !(c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(NameError::BadChar(c));
        }
    }
    Ok(())
}

/// The pattern in [`validate_name`], for schemas.
pub const NAME_PATTERN: &str = "^[A-Za-z_][A-Za-z0-9_-]{0,63}$";

/// `<db>_<rp>_<measurement>`: the chDB table holding one measurement of one policy.
pub fn table_name(db: &str, rp: &str, measurement: &str) -> String {
    let mut s = String::with_capacity(db.len() + rp.len() + measurement.len() + 2);
    s.push_str(db);
    s.push('_');
    s.push_str(rp);
    s.push('_');
    s.push_str(measurement);
    s
}

/// A ClickHouse identifier in backquotes, with backquotes and backslashes escaped, so that no
/// name from a writer can end the identifier early.
pub fn quote_ident(name: &str) -> String {
    let mut s = String::with_capacity(name.len() + 2);
    s.push('`');
    for c in name.chars() {
        match c {
            '`' => s.push_str("\\`"),
            '\\' => s.push_str("\\\\"),
            _ => s.push(c),
        }
    }
    s.push('`');
    s
}

/// A ClickHouse string literal in single quotes, escaped the same way.
pub fn quote_str(value: &str) -> String {
    let mut s = String::with_capacity(value.len() + 2);
    s.push('\'');
    for c in value.chars() {
        match c {
            '\'' => s.push_str("\\'"),
            '\\' => s.push_str("\\\\"),
            '\0' => s.push_str("\\0"),
            _ => s.push(c),
        }
    }
    s.push('\'');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(validate_name("telegraf").is_ok());
        assert!(validate_name("_internal").is_ok());
        assert!(validate_name("a-b_9").is_ok());
        assert_eq!(validate_name(""), Err(NameError::Empty));
        assert_eq!(validate_name("9a"), Err(NameError::BadChar('9')));
        assert_eq!(validate_name("a b"), Err(NameError::BadChar(' ')));
        assert_eq!(validate_name(&"a".repeat(65)), Err(NameError::TooLong));
    }

    #[test]
    fn quoting() {
        assert_eq!(quote_ident("a`b\\c"), "`a\\`b\\\\c`");
        assert_eq!(quote_str("it's"), "'it\\'s'");
        assert_eq!(table_name("db", "rp", "cpu load"), "db_rp_cpu load");
        assert_eq!(file_name_len("a_b"), 3);
        assert_eq!(file_name_len("a b"), 5);
        assert_eq!(file_name_len("€"), 9);
    }
}
