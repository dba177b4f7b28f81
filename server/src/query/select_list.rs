//! The select list as the plan reads it: `*`, `*::field`, `*::tag`, `/regex/` and `mean(*)`
//! replaced by the keys they stand for.

use sluice_core::FieldType;
use sluice_influxql::{DataType, Expr, Field, Literal, SelectStatement, WildcardType};

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
