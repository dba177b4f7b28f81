//! JSON text as InfluxDB 1.8 writes it: object keys in the order of its Go structs (a
//! `serde_json` map is ordered by name), and `pretty=true`'s indentation (Go's `MarshalIndent`
//! with four spaces), so that an answer reads the same as InfluxDB's line by line.

use serde_json::Value;

/// InfluxDB's key order: a result's (`statement_id`, `series`, `messages`, `partial`,
/// `error`), a series' (`name`, `tags`, `columns`, `values`, `partial`), a message's (`level`,
/// `text`). Keys not named here follow in name order.
const KEY_ORDER: &[&str] = &[
    "statement_id",
    "name",
    "tags",
    "columns",
    "values",
    "series",
    "messages",
    "level",
    "text",
    "partial",
    "error",
];

fn rank(key: &str) -> usize {
    KEY_ORDER
        .iter()
        .position(|k| *k == key)
        .unwrap_or(KEY_ORDER.len())
}

/// Writes `v` as compact JSON, object keys in InfluxDB's order.
pub fn write_ordered(out: &mut Vec<u8>, v: &Value) -> serde_json::Result<()> {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            // Stable: keys of equal rank stay in the map's (name) order.
            entries.sort_by_key(|(k, _)| rank(k));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, k)?;
                out.push(b':');
                write_ordered(out, v)?;
            }
            out.push(b'}');
            Ok(())
        }
        Value::Array(items) => array(out, items, write_ordered),
        other => serde_json::to_writer(&mut *out, other),
    }
}

/// Writes `items` as a JSON array, each by `write`.
pub fn array<T>(
    out: &mut Vec<u8>,
    items: &[T],
    write: impl Fn(&mut Vec<u8>, &T) -> serde_json::Result<()>,
) -> serde_json::Result<()> {
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write(out, item)?;
    }
    out.push(b']');
    Ok(())
}

/// `json` with the characters Go's `encoding/json` escapes in strings written as it writes
/// them: `<`, `>` and `&` as `\u003c`, `\u003e`, `\u0026`, and U+2028, U+2029 as `\u2028`,
/// `\u2029`, so that an answer is InfluxDB's byte for byte. Outside strings JSON text holds
/// none of them, so every one found is inside a string. Answers without any come back as they
/// are, without a copy.
pub fn go_escaped(json: Vec<u8>) -> Vec<u8> {
    // Branch-free within each block, so that the scan of a large answer is vectorised; 0xE2
    // leads U+2028 and U+2029 (and other characters, checked below).
    let any = json.chunks(256).any(|block| {
        block.iter().fold(false, |seen, &b| {
            seen | (b == b'<') | (b == b'>') | (b == b'&') | (b == 0xE2)
        })
    });
    if !any {
        return json;
    }
    let mut out = Vec::with_capacity(json.len() + 64);
    let mut i = 0;
    while i < json.len() {
        let c = json[i];
        match c {
            b'<' => out.extend_from_slice(b"\\u003c"),
            b'>' => out.extend_from_slice(b"\\u003e"),
            b'&' => out.extend_from_slice(b"\\u0026"),
            // U+2028 and U+2029 are E2 80 A8 and E2 80 A9 in UTF-8.
            0xE2 if json.get(i + 1) == Some(&0x80)
                && matches!(json.get(i + 2), Some(0xA8 | 0xA9)) =>
            {
                out.extend_from_slice(if json[i + 2] == 0xA8 {
                    b"\\u2028"
                } else {
                    b"\\u2029"
                });
                i += 3;
                continue;
            }
            _ => out.push(c),
        }
        i += 1;
    }
    out
}

/// `compact` (JSON text without whitespace outside strings, as sluice writes it) indented as
/// Go's `json.MarshalIndent(v, "", "    ")` indents, with a final newline: a value per line
/// inside arrays and objects, `": "` after a key, `[]` and `{}` when empty.
pub fn pretty(compact: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(compact.len() * 2);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let newline = |out: &mut Vec<u8>, depth: usize| {
        out.push(b'\n');
        out.extend(std::iter::repeat_n(b' ', depth * 4));
    };
    let mut i = 0;
    while i < compact.len() {
        let c = compact[i];
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_string = false;
            }
            i += 1;
            continue;
        }
        match c {
            b'"' => {
                in_string = true;
                out.push(c);
            }
            b'{' | b'[' => {
                let close = if c == b'{' { b'}' } else { b']' };
                if compact.get(i + 1) == Some(&close) {
                    out.extend_from_slice(&[c, close]);
                    i += 2;
                    continue;
                }
                out.push(c);
                depth += 1;
                newline(&mut out, depth);
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            b',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            b':' => out.extend_from_slice(b": "),
            b' ' | b'\n' | b'\r' | b'\t' => {}
            _ => out.push(c),
        }
        i += 1;
    }
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_come_in_influxdbs_order() {
        let v = json!({"statement_id": 0, "series": [
            {"values": [[1, "a"]], "columns": ["time", "v"], "tags": {"b": "1", "a": "2"}, "name": "cpu"}
        ], "messages": [{"text": "t", "level": "warning"}]});
        let mut out = Vec::new();
        write_ordered(&mut out, &v).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"statement_id":0,"series":[{"name":"cpu","tags":{"a":"2","b":"1"},"columns":["time","v"],"values":[[1,"a"]]}],"messages":[{"level":"warning","text":"t"}]}"#
        );
    }

    #[test]
    fn pretty_indents_as_go_does() {
        let compact = br#"{"results":[{"statement_id":0,"series":[{"name":"c:p,u","columns":["time"],"values":[[1]]}]},{"statement_id":1,"series":[]},{"x":{}}]}"#;
        let want = r#"{
    "results": [
        {
            "statement_id": 0,
            "series": [
                {
                    "name": "c:p,u",
                    "columns": [
                        "time"
                    ],
                    "values": [
                        [
                            1
                        ]
                    ]
                }
            ]
        },
        {
            "statement_id": 1,
            "series": []
        },
        {
            "x": {}
        }
    ]
}
"#;
        assert_eq!(String::from_utf8(pretty(compact)).unwrap(), want);
    }

    /// Go escapes `<`, `>`, `&`, U+2028 and U+2029 in strings; other text, `\"` and other
    /// characters led by 0xE2 (`…`) stay as they are, and text without any is not copied.
    #[test]
    fn strings_are_escaped_as_go_escapes_them() {
        let text = "{\"a<b\":\"x>y&z \u{2028}\u{2029} … \\\"<\"}"
            .as_bytes()
            .to_vec();
        assert_eq!(
            String::from_utf8(go_escaped(text)).unwrap(),
            "{\"a\\u003cb\":\"x\\u003ey\\u0026z \\u2028\\u2029 … \\\"\\u003c\"}"
        );
        let plain = b"{\"results\":[{\"statement_id\":0}]}".to_vec();
        let at = plain.as_ptr();
        let same = go_escaped(plain);
        assert_eq!(same.as_ptr(), at, "no copy without such characters");
    }

    #[test]
    fn pretty_keeps_strings_whole() {
        let compact = br#"{"error":"found \"{\", expected [x] at line 1, char 2\\"}"#;
        let got = pretty(compact);
        let back: Value = serde_json::from_slice(&got).unwrap();
        assert_eq!(back, serde_json::from_slice::<Value>(compact).unwrap());
        assert_eq!(
            String::from_utf8(got).unwrap(),
            "{\n    \"error\": \"found \\\"{\\\", expected [x] at line 1, char 2\\\\\"\n}\n"
        );
    }
}
