//! What a read can name: databases, their retention policies, measurements and field types.
//! On one pod that is its catalog; across a tenant it is the union of every pod's catalog
//! (a database written only through one pod exists for the whole tenant).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sluice_core::config::{RetentionDuration, RetentionPolicyConfig};
use sluice_core::FieldType;

use crate::catalog::Catalog;

use super::Fields;

/// One row of a pod's catalog as it travels to a gathering pod: a field of a measurement, or
/// a policy with no measurements yet (`measurement` empty).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogRow {
    pub db: String,
    pub rp: String,
    /// The policy's duration in nanoseconds; 0 is infinite.
    pub duration_ns: u64,
    pub is_default: u8,
    pub measurement: String,
    pub field: String,
    /// InfluxDB's name of the type (`float`, `integer`, ...).
    pub field_type: String,
    /// Not 0: the row only says that this pod, leaving by hand-off `handed_by`, has handed
    /// the table `measurement` over, or (with `measurement` empty) that it receives that
    /// hand-off and has not settled it (see [`crate::handoff`]).
    #[serde(default)]
    pub handed_by: u64,
}

impl CatalogRow {
    pub fn receiving(id: u64) -> Self {
        Self::handed(id, String::new())
    }

    pub fn handed(id: u64, table: String) -> Self {
        Self {
            db: String::new(),
            rp: String::new(),
            duration_ns: 0,
            is_default: 0,
            measurement: table,
            field: String::new(),
            field_type: String::new(),
            handed_by: id,
        }
    }
}

/// The `url()` structure of [`CatalogRow`]s.
pub const CATALOG_STRUCTURE: &str = "db String, rp String, duration_ns UInt64, is_default UInt8, measurement String, field String, field_type String, handed_by UInt64";

#[derive(Debug, Default, Clone)]
struct Database {
    policies: Vec<RetentionPolicyConfig>,
    /// Per policy, its measurements and their fields.
    measurements: BTreeMap<String, BTreeMap<String, Fields>>,
}

#[derive(Debug, Default, Clone)]
pub struct View {
    dbs: BTreeMap<String, Database>,
    /// Fields whose type differs between pods in a way no number widening settles, per
    /// `(db, rp, measurement)`: a statement reading them gets an error naming them.
    conflicts: BTreeMap<(String, String, String), Vec<String>>,
    /// The tables each hand-off under way has handed over, as the leaving pods say.
    handed: crate::handoff::Handed,
    /// The hand-offs some pod receives and has not settled.
    receiving: std::collections::BTreeSet<u64>,
}

impl View {
    /// This pod's catalog.
    pub fn local(catalog: &Catalog) -> Self {
        let mut dbs = BTreeMap::new();
        for name in catalog.database_names() {
            let policies = catalog.policies(&name).unwrap_or_default();
            let measurements = policies
                .iter()
                .map(|p| (p.name.clone(), catalog.measurements(&name, &p.name)))
                .collect();
            dbs.insert(
                name,
                Database {
                    policies,
                    measurements,
                },
            );
        }
        Self {
            dbs,
            conflicts: BTreeMap::new(),
            handed: Default::default(),
            receiving: Default::default(),
        }
    }

    /// This view as rows, for a gathering pod.
    pub fn rows(&self) -> Vec<CatalogRow> {
        let mut out = Vec::new();
        for (db, d) in &self.dbs {
            for p in &d.policies {
                let row = |measurement: &str, field: &str, t: &str| CatalogRow {
                    db: db.clone(),
                    rp: p.name.clone(),
                    duration_ns: p.duration.0.map_or(0, |d| d.as_nanos() as u64),
                    is_default: p.default as u8,
                    measurement: measurement.into(),
                    field: field.into(),
                    field_type: t.into(),
                    handed_by: 0,
                };
                let ms = d.measurements.get(&p.name);
                if ms.is_none_or(|m| m.is_empty()) {
                    out.push(row("", "", ""));
                }
                for (m, fields) in ms.into_iter().flatten() {
                    for (f, t) in fields {
                        out.push(row(m, f, super::meta::field_type_name(*t)));
                    }
                }
            }
        }
        out
    }

    /// The union of the pods' rows. A field that is an integer on one pod and a float on
    /// another reads as a float everywhere; other differences are conflicts.
    pub fn from_rows(rows: impl IntoIterator<Item = CatalogRow>) -> Self {
        let mut v = View::default();
        for r in rows {
            if r.handed_by != 0 {
                if r.measurement.is_empty() {
                    v.receiving.insert(r.handed_by);
                } else {
                    v.handed
                        .entry(r.handed_by)
                        .or_default()
                        .insert(r.measurement);
                }
                continue;
            }
            let d = v.dbs.entry(r.db.clone()).or_default();
            if !d.policies.iter().any(|p| p.name == r.rp) {
                d.policies.push(RetentionPolicyConfig {
                    name: r.rp.clone(),
                    duration: RetentionDuration(
                        (r.duration_ns > 0).then(|| std::time::Duration::from_nanos(r.duration_ns)),
                    ),
                    default: r.is_default != 0,
                });
            }
            let ms = d.measurements.entry(r.rp.clone()).or_default();
            if r.measurement.is_empty() {
                continue;
            }
            let fields = ms.entry(r.measurement.clone()).or_default();
            let Some(t) = field_type_of(&r.field_type) else {
                continue;
            };
            match fields.get(&r.field).copied() {
                None => {
                    fields.insert(r.field.clone(), t);
                }
                Some(old) if old == t => {}
                Some(old) => match widen(old, t) {
                    Some(w) => {
                        fields.insert(r.field.clone(), w);
                    }
                    None => {
                        let c = v
                            .conflicts
                            .entry((r.db.clone(), r.rp.clone(), r.measurement.clone()))
                            .or_default();
                        if !c.contains(&r.field) {
                            c.push(r.field.clone());
                        }
                    }
                },
            }
        }
        for d in v.dbs.values_mut() {
            d.policies.sort_by(|a, b| a.name.cmp(&b.name));
            // One default: the first pod's word is as good as another's, so the first by name.
            let mut seen = false;
            for p in &mut d.policies {
                p.default &= !seen;
                seen |= p.default;
            }
        }
        v
    }

    pub fn database_names(&self) -> Vec<String> {
        self.dbs.keys().cloned().collect()
    }

    /// The tables handed over by hand-offs under way, per hand-off.
    pub fn handed(&self) -> &crate::handoff::Handed {
        &self.handed
    }

    /// Whether some pod hands its data to another and the hand-off is not settled.
    pub fn handoff_under_way(&self) -> bool {
        !self.handed.is_empty() || !self.receiving.is_empty()
    }

    pub fn policies(&self, db: &str) -> Option<Vec<RetentionPolicyConfig>> {
        self.dbs.get(db).map(|d| d.policies.clone())
    }

    pub fn default_policy(&self, db: &str) -> Option<String> {
        let d = self.dbs.get(db)?;
        d.policies
            .iter()
            .find(|p| p.default)
            .or(d.policies.first())
            .map(|p| p.name.clone())
    }

    pub fn measurements(&self, db: &str, rp: &str) -> BTreeMap<String, Fields> {
        self.dbs
            .get(db)
            .and_then(|d| d.measurements.get(rp))
            .cloned()
            .unwrap_or_default()
    }

    /// An error naming the fields of `measurement` whose types the pods disagree on.
    pub fn conflict(&self, db: &str, rp: &str, measurement: &str) -> Option<String> {
        let fields =
            self.conflicts
                .get(&(db.to_string(), rp.to_string(), measurement.to_string()))?;
        Some(format!(
            "field type conflict: {} of measurement {measurement} have different types on the tenant's pods (a field keeps the type of its first write on each pod); write them with one type, or read another measurement",
            fields.join(", ")
        ))
    }
}

pub(crate) fn field_type_of(name: &str) -> Option<FieldType> {
    Some(match name {
        "float" => FieldType::Float,
        "integer" => FieldType::Integer,
        "unsigned" => FieldType::UInteger,
        "string" => FieldType::String,
        "boolean" => FieldType::Boolean,
        _ => return None,
    })
}

/// Numbers of different kinds read as floats.
fn widen(a: FieldType, b: FieldType) -> Option<FieldType> {
    let numeric = |t| {
        matches!(
            t,
            FieldType::Float | FieldType::Integer | FieldType::UInteger
        )
    };
    (numeric(a) && numeric(b)).then_some(FieldType::Float)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(db: &str, m: &str, f: &str, t: &str) -> CatalogRow {
        CatalogRow {
            db: db.into(),
            rp: "autogen".into(),
            duration_ns: 0,
            is_default: 1,
            measurement: m.into(),
            field: f.into(),
            field_type: t.into(),
            handed_by: 0,
        }
    }

    #[test]
    fn pods_catalogs_unite_and_numbers_widen() {
        let v = View::from_rows([
            row("a", "cpu", "v", "integer"),
            row("a", "cpu", "v", "float"),
            row("a", "cpu", "n", "integer"),
            row("b", "", "", ""),
            row("a", "mem", "s", "string"),
            row("a", "mem", "s", "boolean"),
        ]);
        assert_eq!(v.database_names(), ["a", "b"]);
        let cpu = &v.measurements("a", "autogen")["cpu"];
        assert_eq!(cpu["v"], FieldType::Float);
        assert_eq!(cpu["n"], FieldType::Integer);
        assert!(v.measurements("b", "autogen").is_empty());
        assert_eq!(v.default_policy("b").as_deref(), Some("autogen"));
        assert!(v.conflict("a", "autogen", "cpu").is_none());
        assert!(!v.handoff_under_way());
        let busy = View::from_rows([row("a", "cpu", "v", "float"), CatalogRow::receiving(7)]);
        assert!(busy.handoff_under_way() && busy.handed().is_empty());
        let handed = View::from_rows([CatalogRow::handed(7, "a_autogen_cpu".into())]);
        assert_eq!(handed.handed()[&7].len(), 1);
        let msg = v.conflict("a", "autogen", "mem").unwrap();
        assert!(msg.contains("s of measurement mem"), "{msg}");
    }
}
