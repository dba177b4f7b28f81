//! Result column names, following InfluxDB 1.8 (`Field.Name()` and
//! `SelectStatement.ColumnNames()` in influxql's ast.go), so that clients that look columns up
//! by name (Grafana does) find them where InfluxDB would put them.

use crate::ast::{Dimension, Duration, Expr, Field, SelectStatement, TimeOffset};

impl Field {
    /// The column this field produces: its alias; else a call's name (`mean("v")` is
    /// `mean`); for arithmetic, the names of the references and outermost calls in it, left
    /// to right, joined with `_` (`mean("v") / 100` is `mean`, `"a" + "b"` is `a_b`); a
    /// reference's own name. Literals, wildcards and regexes have no name of their own (a
    /// wildcard or regex field is expanded to the matching keys before it is named).
    pub fn column_name(&self) -> String {
        if let Some(alias) = &self.alias {
            return alias.clone();
        }
        expr_name(&self.expr)
    }
}

fn expr_name(expr: &Expr) -> String {
    match expr {
        Expr::Call { name, .. } => name.clone(),
        // `SELECT DISTINCT v` runs as `distinct(v)`, and is named like it.
        Expr::Distinct(_) => "distinct".to_string(),
        Expr::Binary { .. } => {
            let mut names = Vec::new();
            binary_names(expr, &mut names);
            names.join("_")
        }
        Expr::Paren(inner) => expr_name(inner),
        Expr::VarRef { name, .. } => name.clone(),
        Expr::Literal(_) | Expr::Wildcard(_) => String::new(),
    }
}

/// Collects the names of references and calls (without descending into calls), in order.
/// Recursion is bounded by the parser's expression height limit.
fn binary_names<'a>(expr: &'a Expr, out: &mut Vec<&'a str>) {
    match expr {
        Expr::VarRef { name, .. } => out.push(name),
        Expr::Call { name, .. } => out.push(name),
        Expr::Binary { lhs, rhs, .. } => {
            binary_names(lhs, out);
            binary_names(rhs, out);
        }
        Expr::Paren(inner) => binary_names(inner, out),
        Expr::Distinct(_) | Expr::Literal(_) | Expr::Wildcard(_) => {}
    }
}

impl SelectStatement {
    /// The columns of the result, `time` first, as InfluxDB 1.8 names them: a plain `time`
    /// field is not a column of its own but renames the time column when aliased; `top()` and
    /// `bottom()` add a column per tag argument; aliases are kept as written and any other
    /// name already taken gets `_1`, `_2`, ... appended (`SELECT mean(a), mean(b)` gives
    /// `time, mean, mean_1`).
    pub fn column_names(&self) -> Vec<String> {
        let mut time = "time".to_string();
        let mut columns: Vec<Field> = Vec::new();
        for field in &self.fields {
            match &field.expr {
                Expr::VarRef { name, .. } if name == "time" => {
                    if let Some(alias) = &field.alias {
                        time = alias.clone();
                    }
                    continue;
                }
                Expr::Call { name, args } if name == "top" || name == "bottom" => {
                    columns.push(field.clone());
                    for arg in args.iter().skip(1) {
                        if let Expr::VarRef { .. } = arg {
                            columns.push(Field {
                                expr: arg.clone(),
                                alias: None,
                            });
                        }
                    }
                    continue;
                }
                _ => columns.push(field.clone()),
            }
        }

        let mut taken: std::collections::HashMap<String, usize> = columns
            .iter()
            .filter_map(|f| f.alias.clone().map(|a| (a, 1)))
            .collect();
        let mut names = vec![time];
        for field in &columns {
            if let Some(alias) = &field.alias {
                names.push(alias.clone());
                continue;
            }
            let base = field.column_name();
            let mut name = base.clone();
            if let Some(&count) = taken.get(&base) {
                let mut n = count;
                loop {
                    let candidate = format!("{base}_{n}");
                    if !taken.contains_key(&candidate) {
                        taken.insert(base.clone(), n + 1);
                        name = candidate;
                        break;
                    }
                    n += 1;
                }
            }
            *taken.entry(name.clone()).or_insert(0) += 1;
            names.push(name);
        }
        names
    }

    /// The `GROUP BY time(...)` interval and offset, if the query has one.
    pub fn group_by_time(&self) -> Option<(Duration, Option<TimeOffset>)> {
        self.group_by.iter().find_map(|d| match d {
            Dimension::Time { interval, offset } => Some((*interval, *offset)),
            _ => None,
        })
    }

    /// The tag keys named in GROUP BY, in order.
    pub fn group_by_tags(&self) -> Vec<&str> {
        self.group_by
            .iter()
            .filter_map(|d| match d {
                Dimension::Tag(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::ast::Statement;

    fn select(q: &str) -> crate::ast::SelectStatement {
        match crate::parse(q).map(|mut s| s.remove(0)) {
            Ok(Statement::Select(s)) => *s,
            other => panic!("{q}: {other:?}"),
        }
    }

    fn names(fields: &str) -> Vec<String> {
        select(&format!("SELECT {fields} FROM m")).column_names()
    }

    #[test]
    fn field_names() {
        let name = |f: &str| names(f).remove(1);
        assert_eq!(name(r#"mean("value")"#), "mean");
        assert_eq!(name(r#"mean("value") / 100"#), "mean");
        assert_eq!(name(r#"mean("value") /100 AS "text""#), "text");
        assert_eq!(name(r#"derivative(mean("value"), 1s)"#), "derivative");
        assert_eq!(name(r#""host"::tag"#), "host");
        assert_eq!(name(r#""a" + "b" * 2"#), "a_b");
        assert_eq!(name(r#"(max(a) - min(a))"#), "max_min");
        assert_eq!(name("-v"), "v");
        assert_eq!(name("DISTINCT v"), "distinct");
        assert_eq!(name("count(distinct(v))"), "count");
        assert_eq!(name("1"), "");
    }

    #[test]
    fn statement_columns() {
        assert_eq!(names("mean(a), mean(b)"), ["time", "mean", "mean_1"]);
        assert_eq!(
            names("mean(a), mean(b) AS mean"),
            ["time", "mean_1", "mean"]
        );
        assert_eq!(names("time AS t, v"), ["t", "v"]);
        assert_eq!(names("top(v, host, 3)"), ["time", "top", "host"]);
        assert_eq!(names("a, a, a"), ["time", "a", "a_1", "a_2"]);
    }

    #[test]
    fn group_by_accessors() {
        let s = select("SELECT mean(v) FROM m GROUP BY time(10s), host, dc");
        assert_eq!(
            s.group_by_time().map(|(d, o)| (d.0, o)),
            Some((10_000_000_000, None))
        );
        assert_eq!(s.group_by_tags(), ["host", "dc"]);
        assert_eq!(select("SELECT v FROM m").group_by_time(), None);
    }
}
