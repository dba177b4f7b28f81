//! The order of a measurement's groups, as InfluxDB lists them: by their tag values, in tag
//! key order, each compared as bytes (a value before the values it begins), backwards under
//! `ORDER BY time DESC`. The engine orders groups by their tags written as JSON, which agrees
//! but where a value goes on past another's end with a byte below `"` (a space, `!`): the
//! closing quote sorts after it, so `us east 2` came before `us east`, and `us east` before
//! `us`; and where the engine's JSON escapes a character (`"`, `\`, control characters, and
//! `/`, U+2028 and U+2029, which it escapes too): `q"a` sorted as `q\"a`, after `q#`, and
//! `p/x` as `p\/x`, after `p0`. Such answers are put in order here; the others are already.

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Deserialize)]
struct Head {
    name: String,
    #[serde(default)]
    tags: BTreeMap<String, String>,
}

/// Orders each measurement's `series` (JSON objects, each measurement's together) by their
/// tags as InfluxDB does; measurements keep their places.
pub fn in_influx_order(series: &mut [Vec<u8>], descending: bool) {
    if !series.iter().any(|s| head_may_be_misordered(s)) {
        return;
    }
    // Each series with the run of its measurement and its tag values, in key order.
    let mut runs = 0;
    let mut last: Option<String> = None;
    let mut entries: Vec<(usize, Vec<String>, Vec<u8>)> = Vec::with_capacity(series.len());
    for s in series.iter_mut() {
        let bytes = std::mem::take(s);
        let (name, values) = match serde_json::from_slice::<Head>(&bytes) {
            Ok(h) => (h.name, h.tags.into_values().collect()),
            Err(_) => (String::new(), Vec::new()),
        };
        if last.as_ref() != Some(&name) {
            runs += 1;
            last = Some(name);
        }
        entries.push((runs, values, bytes));
    }
    entries.sort_by(|a, b| {
        let values = if descending {
            b.1.cmp(&a.1)
        } else {
            a.1.cmp(&b.1)
        };
        a.0.cmp(&b.0).then(values)
    });
    for (slot, (_, _, bytes)) in series.iter_mut().zip(entries) {
        *slot = bytes;
    }
}

/// Whether a series' name or tags hold a byte whose place the engine's order may get wrong:
/// a space, `!`, an escape (`\`, sluice's JSON of `"`, `\` and control characters), `/` or the
/// first byte of U+2028 and U+2029 (in the JSON before its columns, which sluice writes
/// without whitespace outside strings).
fn head_may_be_misordered(series: &[u8]) -> bool {
    let head = series
        .windows(10)
        .position(|w| w == b"\"columns\":")
        .map_or(series, |end| &series[..end]);
    head.iter()
        .any(|b| matches!(b, b' ' | b'!' | b'\\' | b'/' | 0xE2))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(name: &str, tags: &str) -> Vec<u8> {
        format!(r#"{{"name":"{name}","tags":{tags},"columns":["time"],"values":[[1]]}}"#)
            .into_bytes()
    }

    fn names(series: &[Vec<u8>]) -> Vec<String> {
        series
            .iter()
            .map(|x| {
                let v: serde_json::Value = serde_json::from_slice(x).unwrap();
                format!("{} {}", v["name"].as_str().unwrap(), v["tags"])
            })
            .collect()
    }

    #[test]
    fn a_value_comes_before_the_values_it_begins() {
        let mut series = vec![
            s("a", r#"{"region":"us east 2"}"#),
            s("a", r#"{"region":"us east"}"#),
            s("a", r#"{"region":"us"}"#),
            s("b", r#"{"region":"z"}"#),
            s("b", r#"{"region":"x y"}"#),
        ];
        in_influx_order(&mut series, false);
        assert_eq!(
            names(&series),
            [
                r#"a {"region":"us"}"#,
                r#"a {"region":"us east"}"#,
                r#"a {"region":"us east 2"}"#,
                r#"b {"region":"x y"}"#,
                r#"b {"region":"z"}"#,
            ]
        );
        in_influx_order(&mut series, true);
        assert_eq!(names(&series)[0], r#"a {"region":"us east 2"}"#);
        assert_eq!(names(&series)[4], r#"b {"region":"x y"}"#);
    }

    /// Values with characters the engine's JSON escapes come in the order of their bytes.
    #[test]
    fn escaped_characters_compare_as_themselves() {
        let mut series = vec![
            s("o", r#"{"r":"p0"}"#),
            s("o", r#"{"r":"p/x"}"#),
            s("o", r#"{"r":"q#"}"#),
            s("o", r#"{"r":"q\"a"}"#),
        ];
        in_influx_order(&mut series, false);
        assert_eq!(
            names(&series),
            [
                r#"o {"r":"p/x"}"#,
                r#"o {"r":"p0"}"#,
                r#"o {"r":"q\"a"}"#,
                r#"o {"r":"q#"}"#,
            ]
        );
    }

    #[test]
    fn tags_compare_in_key_order_and_plain_answers_stay_as_they_are() {
        let mut series = vec![
            s("m", r#"{"b":"1","a":"x"}"#),
            s("m", r#"{"b":"0","a":"x y"}"#),
            s("m", r#"{"b":"2","a":""}"#),
        ];
        in_influx_order(&mut series, false);
        assert_eq!(
            names(&series),
            [
                r#"m {"a":"","b":"2"}"#,
                r#"m {"a":"x","b":"1"}"#,
                r#"m {"a":"x y","b":"0"}"#,
            ]
        );
        // None of those bytes: the engine's order is InfluxDB's, left as it is (even if not
        // sorted).
        let mut plain = vec![s("m", r#"{"h":"b"}"#), s("m", r#"{"h":"a"}"#)];
        in_influx_order(&mut plain, false);
        assert_eq!(names(&plain), [r#"m {"h":"b"}"#, r#"m {"h":"a"}"#]);
    }
}
