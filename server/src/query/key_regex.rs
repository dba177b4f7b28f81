//! The regular expressions of a select list (`SELECT /^us/`) and of `GROUP BY /re/`, which
//! pick field and tag names before the query is planned (the engine runs every other regex).

use super::PlanError;

/// Enough of a regular expression to pick field and tag names for `SELECT /re/`: literal
/// text with `^` and `$` anchors, `.`, `.*`, and `(a|b)` alternatives. Anything richer is
/// refused with a message rather than matched wrongly.
pub struct SimpleRegex {
    alternatives: Vec<String>,
    anchored_start: bool,
    anchored_end: bool,
}

impl SimpleRegex {
    pub fn new(re: &str) -> Result<Self, PlanError> {
        let mut body = re;
        let anchored_start = body.starts_with('^');
        if anchored_start {
            body = &body[1..];
        }
        let anchored_end = body.ends_with('$') && !body.ends_with("\\$");
        if anchored_end {
            body = &body[..body.len() - 1];
        }
        if let Some(inner) = body.strip_prefix('(').and_then(|b| b.strip_suffix(')')) {
            body = inner;
        }
        let alternatives: Vec<String> = body.split('|').map(str::to_string).collect();
        if alternatives
            .iter()
            .any(|a| a.chars().any(|c| "()[]{}+?\\".contains(c)))
        {
            return Err(PlanError::Unsupported(format!(
                "SELECT /{re}/: only plain names, ^, $, ., .* and (a|b) are supported in a field regex"
            )));
        }
        Ok(Self {
            alternatives,
            anchored_start,
            anchored_end,
        })
    }

    pub fn is_match(&self, s: &str) -> bool {
        self.alternatives.iter().any(|a| {
            let starts: Vec<usize> = if self.anchored_start {
                vec![0]
            } else {
                (0..=s.len()).filter(|&i| s.is_char_boundary(i)).collect()
            };
            starts
                .into_iter()
                .any(|i| glob(a.as_bytes(), &s.as_bytes()[i..], self.anchored_end))
        })
    }
}

/// `.` any byte, `.*` any run; the rest literal. `full`: must end with `s`.
fn glob(p: &[u8], s: &[u8], full: bool) -> bool {
    if p.is_empty() {
        return !full || s.is_empty();
    }
    if p.len() >= 2 && p[0] == b'.' && p[1] == b'*' {
        return (0..=s.len()).any(|i| glob(&p[2..], &s[i..], full));
    }
    match s.first() {
        Some(&c) if p[0] == b'.' || p[0] == c => glob(&p[1..], &s[1..], full),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_regexes_match_like_re2_for_the_simple_forms() {
        let r = SimpleRegex::new("^(cpu|mem)$").unwrap();
        assert!(r.is_match("cpu") && r.is_match("mem") && !r.is_match("cpu2"));
        let r = SimpleRegex::new("us.*").unwrap();
        assert!(r.is_match("usage_user") && r.is_match("xus") && !r.is_match("u"));
        assert!(SimpleRegex::new("a+").is_err());
    }
}
