//! Line-protocol escaping rules, shared by the parser and the series key.
//!
//! A backslash always pairs with the byte after it (this is how InfluxDB 1.8
//! finds the end of a token). When unescaping, `\X` becomes `X` if `X` is
//! special in that context, and stays the two bytes `\X` otherwise, so a
//! Windows path tag `C:\Users` survives intact. Unlike 1.8 (which runs
//! `bytes.Replace` per escape code) we unescape pair by pair, so `\\\,`
//! means "`\\` then an escaped comma" → `\\,` rather than 1.8's `\,`; this
//! keeps `escape(unescape(raw))` re-parsable to the same string, which the
//! canonical series key relies on. The two only differ for a run of
//! backslashes directly before a special character.

use std::borrow::Cow;

/// Which characters are special (escaped with a backslash) in a context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EscapeSet {
    /// Measurement names: `,` and space.
    Measurement,
    /// Tag keys, tag values and field keys: `,`, `=` and space.
    Tag,
    /// Double-quoted string field values: `"` and `\`.
    StringField,
}

impl EscapeSet {
    /// Whether `b` must be preceded by a backslash in this context.
    #[inline]
    pub const fn is_special(self, b: u8) -> bool {
        match self {
            EscapeSet::Measurement => matches!(b, b',' | b' '),
            EscapeSet::Tag => matches!(b, b',' | b'=' | b' '),
            EscapeSet::StringField => matches!(b, b'"' | b'\\'),
        }
    }
}

/// Appends the unescaped form of `raw` to `out` (see the module docs).
///
/// A trailing lone backslash is kept literally.
pub fn unescape_into(raw: &[u8], set: EscapeSet, out: &mut Vec<u8>) {
    let mut rest = raw;
    while let Some(i) = memchr::memchr(b'\\', rest) {
        out.extend_from_slice(&rest[..i]);
        match rest.get(i + 1) {
            Some(&next) => {
                if !set.is_special(next) {
                    out.push(b'\\');
                }
                out.push(next);
                rest = &rest[i + 2..];
            }
            None => {
                out.push(b'\\');
                rest = &[];
            }
        }
    }
    out.extend_from_slice(rest);
}

/// The unescaped form of `raw`, borrowing when there is nothing to unescape.
pub fn unescape(raw: &[u8], set: EscapeSet) -> Cow<'_, [u8]> {
    if memchr::memchr(b'\\', raw).is_none() {
        Cow::Borrowed(raw)
    } else {
        let mut out = Vec::with_capacity(raw.len());
        unescape_into(raw, set, &mut out);
        Cow::Owned(out)
    }
}

/// Appends `s` to `out` with a backslash before every special byte; nothing
/// else (in particular not the backslash itself) is escaped.
pub fn escape_into(s: &[u8], set: EscapeSet, out: &mut Vec<u8>) {
    let mut start = 0;
    for (i, &b) in s.iter().enumerate() {
        if set.is_special(b) {
            out.extend_from_slice(&s[start..i]);
            out.push(b'\\');
            out.push(b);
            start = i + 1;
        }
    }
    out.extend_from_slice(&s[start..]);
}

/// Whether `escape_into` would change `s`.
pub fn needs_escape(s: &[u8], set: EscapeSet) -> bool {
    s.iter().any(|&b| set.is_special(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn un(raw: &str, set: EscapeSet) -> String {
        String::from_utf8(unescape(raw.as_bytes(), set).into_owned()).unwrap()
    }

    fn esc(s: &str, set: EscapeSet) -> String {
        let mut out = Vec::new();
        escape_into(s.as_bytes(), set, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn unescapes_only_special_pairs() {
        assert_eq!(un(r"a\,b\ c", EscapeSet::Measurement), "a,b c");
        assert_eq!(un(r"a\=b", EscapeSet::Measurement), r"a\=b");
        assert_eq!(un(r"a\=b\,c\ d", EscapeSet::Tag), "a=b,c d");
        assert_eq!(un(r"C:\Users", EscapeSet::Tag), r"C:\Users");
        assert_eq!(un(r"a\\b", EscapeSet::Tag), r"a\\b");
        assert_eq!(un(r"a\\\,b", EscapeSet::Tag), r"a\\,b");
        assert_eq!(un(r"trail\", EscapeSet::Tag), r"trail\");
        assert_eq!(
            un(r#"say \"hi\" \\ \n"#, EscapeSet::StringField),
            r#"say "hi" \ \n"#
        );
        assert!(matches!(
            unescape(b"plain", EscapeSet::Tag),
            Cow::Borrowed(b"plain")
        ));
    }

    #[test]
    fn escapes_only_specials() {
        assert_eq!(esc("a,b c=d", EscapeSet::Measurement), r"a\,b\ c=d");
        assert_eq!(esc("a,b c=d", EscapeSet::Tag), r"a\,b\ c\=d");
        assert_eq!(esc(r"C:\x", EscapeSet::Tag), r"C:\x");
        assert!(needs_escape(b"a b", EscapeSet::Tag));
        assert!(!needs_escape(b"a=b", EscapeSet::Measurement));
    }

    #[test]
    fn escape_then_unescape_round_trips_parser_output() {
        // Strings a parser can produce: every backslash starts a pair whose
        // second byte is not special.
        for s in ["a,b", r"a\\,b", r"C:\Users x", "=", r"\\\\", "ü,=ß"] {
            let mut e = Vec::new();
            escape_into(s.as_bytes(), EscapeSet::Tag, &mut e);
            assert_eq!(unescape(&e, EscapeSet::Tag).as_ref(), s.as_bytes(), "{s}");
        }
    }
}
