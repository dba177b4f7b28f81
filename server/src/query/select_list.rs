//! The select list as the plan reads it: `*`, `*::field`, `*::tag`, `/regex/` and `mean(*)`
//! replaced by the keys they stand for.

use std::collections::BTreeMap;

use sluice_core::FieldType;
use sluice_influxql::{DataType, Dimension, Expr, Field, Literal, SelectStatement, WildcardType};

use super::grouping::{compile, Grouping};
use super::key_regex::SimpleRegex;
use super::plan::Source;
use super::PlanError;

/// The select list with `*`, `*::field`, `*::tag` and `/regex/` replaced by the keys they
/// stand for: fields and tags together in name order, grouping tags left out (InfluxDB's
/// order and rule).
pub(super) fn expand_fields(
    stmt: &SelectStatement,
    src: &Source,
    grouping: &Grouping,
) -> Result<Vec<Field>, PlanError> {
    let mut out = Vec::new();
    for f in &stmt.fields {
        let keys: Option<Vec<(String, DataType)>> = match &f.expr {
            Expr::Wildcard(kind) => Some(wildcard_keys(src, grouping, *kind, None)),
            Expr::Literal(Literal::Regex(re)) => {
                let re = compile(re.as_str())?;
                Some(wildcard_keys(src, grouping, None, Some(&re)))
            }
            Expr::Call { name, args } if args.first().is_some_and(is_wildcard) => {
                // `mean(*)`: the function of every field it applies to, named `mean_<field>`.
                let re = match &args[0] {
                    Expr::Literal(Literal::Regex(re)) => Some(compile(re.as_str())?),
                    _ => None,
                };
                let numeric_only = !matches!(name.as_str(), "count" | "first" | "last");
                for (field, t) in src.fields {
                    if re.as_ref().is_some_and(|r| !r.is_match(field))
                        || (numeric_only
                            && !matches!(
                                t,
                                FieldType::Float | FieldType::Integer | FieldType::UInteger
                            ))
                    {
                        continue;
                    }
                    let mut call_args = args.clone();
                    call_args[0] = Expr::VarRef {
                        name: field.clone(),
                        data_type: None,
                    };
                    out.push(Field {
                        expr: Expr::Call {
                            name: name.clone(),
                            args: call_args,
                        },
                        alias: Some(format!("{name}_{field}")),
                    });
                }
                continue;
            }
            _ => None,
        };
        match keys {
            None => out.push(f.clone()),
            Some(keys) => out.extend(keys.into_iter().map(|(name, t)| Field {
                expr: Expr::VarRef {
                    name,
                    data_type: Some(t),
                },
                alias: None,
            })),
        }
    }
    Ok(out)
}

fn is_wildcard(e: &Expr) -> bool {
    matches!(e, Expr::Wildcard(_) | Expr::Literal(Literal::Regex(_)))
}

fn wildcard_keys(
    src: &Source,
    grouping: &Grouping,
    kind: Option<WildcardType>,
    re: Option<&SimpleRegex>,
) -> Vec<(String, DataType)> {
    let mut keys: Vec<(String, DataType)> = Vec::new();
    if kind != Some(WildcardType::Tag) {
        keys.extend(src.fields.keys().map(|k| (k.clone(), DataType::Field)));
    }
    if kind != Some(WildcardType::Field) {
        keys.extend(
            src.tag_keys
                .iter()
                .filter(|k| !grouping.groups_by(k) && !src.fields.contains_key(*k))
                .map(|k| (k.clone(), DataType::Tag)),
        );
    }
    keys.retain(|(k, _)| re.is_none_or(|r| r.is_match(k)));
    keys.sort_by(|a, b| a.0.cmp(&b.0));
    keys
}

/// `stmt` over several measurements (each its fields and tag keys) with its wildcards, in the
/// select list and in `GROUP BY`, replaced by the keys of all of them together, as InfluxDB
/// expands them: every measurement's series then has every column and every grouping tag,
/// null or empty where the measurement has no such field or tag. `None` when there is no
/// wildcard.
pub(super) fn expand_over(
    stmt: &SelectStatement,
    measurements: &[(&BTreeMap<String, FieldType>, &[String])],
) -> Result<Option<SelectStatement>, PlanError> {
    let wildcard = |e: &Expr| match e {
        Expr::Call { args, .. } => args.first().is_some_and(is_wildcard),
        other => is_wildcard(other),
    };
    let grouped_by_wildcard = stmt
        .group_by
        .iter()
        .any(|d| matches!(d, Dimension::Wildcard | Dimension::Regex(_)));
    if !grouped_by_wildcard && !stmt.fields.iter().any(|f| wildcard(&f.expr)) {
        return Ok(None);
    }
    let mut fields: BTreeMap<String, FieldType> = BTreeMap::new();
    let mut tag_keys: Vec<String> = Vec::new();
    for (f, tags) in measurements {
        for (name, t) in f.iter() {
            // A field numeric anywhere counts as numeric for `mean(*)` and its kin.
            let numeric = |t: &FieldType| {
                matches!(
                    t,
                    FieldType::Float | FieldType::Integer | FieldType::UInteger
                )
            };
            let kept = fields.entry(name.clone()).or_insert(*t);
            if !numeric(kept) && numeric(t) {
                *kept = *t;
            }
        }
        tag_keys.extend(tags.iter().cloned());
    }
    tag_keys.sort();
    tag_keys.dedup();
    let src = Source {
        db: "",
        measurement: "",
        table: "",
        fields: &fields,
        tag_keys: &tag_keys,
        series: None,
        series_ids: None,
        series_tags: None,
        ordered_sums: false,
    };
    // `*` and `/regex/` in `GROUP BY` as the keys they stand for over all the measurements.
    let grouping = Grouping::of(stmt, &src)?;
    let fields = expand_fields(stmt, &src, &grouping)?;
    let group_by = stmt
        .group_by
        .iter()
        .filter(|d| matches!(d, Dimension::Time { .. }))
        .cloned()
        .chain(grouping.keys().iter().cloned().map(Dimension::Tag))
        .collect();
    Ok(Some(SelectStatement {
        fields,
        group_by,
        ..stmt.clone()
    }))
}
