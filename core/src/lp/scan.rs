//! Byte-level scanning of line-protocol structure. Every function is total:
//! positions past the end mean "end of input", never a panic.

use memchr::{memchr, memchr2, memchr3};

/// First unescaped `needle` in `s` at or after `from`. A backslash always
/// consumes the byte after it, as in InfluxDB's scanner.
pub(crate) fn find_unescaped(s: &[u8], needle: u8, from: usize) -> Option<usize> {
    let mut i = from;
    loop {
        let off = memchr2(needle, b'\\', s.get(i..)?)?;
        let j = i + off;
        if s[j] == needle {
            return Some(j);
        }
        i = j + 2;
    }
}

/// Where the series key (measurement and tags) starting at `start` ends:
/// the first unescaped space. `None` if the line ends first.
pub(crate) fn key_end(body: &[u8], start: usize) -> Option<usize> {
    let mut i = start;
    loop {
        let off = memchr3(b' ', b'\\', b'\n', body.get(i..)?)?;
        let j = i + off;
        match body[j] {
            b' ' => return Some(j),
            b'\\' if !matches!(body.get(j + 1), Some(b'\n') | None) => i = j + 2,
            _ => return None,
        }
    }
}

/// Skips spaces, tabs and carriage returns.
pub(crate) fn skip_blanks(body: &[u8], mut i: usize) -> usize {
    while matches!(body.get(i), Some(b' ' | b'\t' | b'\r')) {
        i += 1;
    }
    i
}

/// End of an unquoted value or timestamp token.
pub(crate) fn token_end(body: &[u8], mut i: usize) -> usize {
    while let Some(&b) = body.get(i) {
        if matches!(b, b',' | b' ' | b'\t' | b'\n' | b'\r') {
            break;
        }
        i += 1;
    }
    i
}

/// Position of the closing quote of a string whose content starts at
/// `from`, honouring backslash escapes. `None` if it is never closed.
pub(crate) fn closing_quote(body: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    loop {
        let off = memchr2(b'"', b'\\', body.get(i..)?)?;
        let j = i + off;
        if body[j] == b'"' {
            return Some(j);
        }
        i = j + 2;
    }
}

/// End (index of the `\n`, or `body.len()`) of a line that failed to parse,
/// so parsing can resume at the next one.
///
/// Mirrors InfluxDB's `scanLine`: a newline inside a quoted string field
/// value does not end the line. A quote opens a string only directly after
/// an unescaped `=` in the field section. If the string is never closed,
/// the line ends at the first newline after the opening quote instead of
/// swallowing the rest of the body (InfluxDB would), so later lines survive.
pub(crate) fn recover_line_end(body: &[u8], start: usize) -> usize {
    #[derive(PartialEq)]
    enum Section {
        Key,
        Fields,
        Rest,
    }
    let mut section = Section::Key;
    let mut i = start;
    while let Some(&b) = body.get(i) {
        match b {
            b'\n' => return i,
            b'\\' => {
                if body.get(i + 1) == Some(&b'\n') {
                    return i + 1;
                }
                i += 2;
                continue;
            }
            b' ' => {
                section = match section {
                    Section::Key => Section::Fields,
                    _ => Section::Rest,
                };
            }
            b'"' if section == Section::Fields && i > start && body[i - 1] == b'=' => {
                match closing_quote(body, i + 1) {
                    Some(q) => {
                        i = q + 1;
                        continue;
                    }
                    None => return line_end(body, i),
                }
            }
            _ => {}
        }
        i += 1;
    }
    body.len()
}

/// Index of the next `\n` at or after `i`, or `body.len()`.
pub(crate) fn line_end(body: &[u8], i: usize) -> usize {
    body.get(i..)
        .and_then(|s| memchr(b'\n', s))
        .map_or(body.len(), |o| i + o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_unescaped_skips_pairs() {
        assert_eq!(find_unescaped(br"a\,b,c", b',', 0), Some(4));
        assert_eq!(find_unescaped(br"a\\,b", b',', 0), Some(3));
        assert_eq!(find_unescaped(br"a\", b',', 0), None);
        assert_eq!(find_unescaped(b"abc", b',', 10), None);
    }

    #[test]
    fn key_end_handles_escapes_and_line_ends() {
        assert_eq!(key_end(br"cpu\ x,a=b f=1", 0), Some(10));
        assert_eq!(key_end(b"cpu\nx f=1", 0), None);
        assert_eq!(key_end(b"cpu\\\n f=1", 0), None);
        assert_eq!(key_end(b"cpu", 0), None);
        assert_eq!(key_end(b"cpu\\", 0), None);
    }

    #[test]
    fn recover_respects_quoted_newlines() {
        let body = b"m f=\"a\nb\" x\nnext";
        assert_eq!(recover_line_end(body, 0), 11);
        let body = b"m f=\"unterminated\nnext f=1\n";
        assert_eq!(recover_line_end(body, 0), 17);
        // A quote in the key or timestamp section does not open a string.
        let body = b"m\"x f=1 \"y\nnext";
        assert_eq!(recover_line_end(body, 0), 10);
        assert_eq!(recover_line_end(b"abc", 0), 3);
    }
}
