//! The tenant's catalog: gathered from every pod, and reused for a second.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::super::view::{CatalogRow, View, CATALOG_STRUCTURE};
use super::super::Budget;
use super::Gather;
use crate::cluster::Partial;

/// How long a gathered catalog is reused: a dashboard sends many requests at once, and each
/// would otherwise start with a round trip to every pod. A database or measurement first
/// written in the last second may be missing from it, as its points may be from the answer
/// until they are flushed (`pool.flush_interval`).
pub const VIEW_TTL: Duration = Duration::from_secs(1);

/// The tenant's catalog as last gathered from every pod, and from which pods.
#[derive(Default)]
pub struct ViewCache(Mutex<Option<(Instant, Vec<String>, View)>>);

impl ViewCache {
    fn get(&self, peers: &[String]) -> Option<View> {
        let cached = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match &*cached {
            Some((at, from, view)) if at.elapsed() < VIEW_TTL && from == peers => {
                Some(view.clone())
            }
            _ => None,
        }
    }

    /// Forgets the cached view (a pod said it is older than its hand-off).
    pub fn clear(&self) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    fn put(&self, peers: &[String], view: &View) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((Instant::now(), peers.to_vec(), view.clone()));
    }
}

impl Gather<'_> {
    /// The union of every pod's catalog (gathered at most [`VIEW_TTL`] ago, from every pod).
    pub fn view(&self, budget: &Budget) -> Result<View, String> {
        if let Some(v) = self.app.views.get(&self.names) {
            return Ok(v);
        }
        let view = self.gather_view(budget)?;
        if self.missing.borrow().is_empty() {
            self.app.views.put(&self.names, &view);
        }
        Ok(view)
    }

    fn gather_view(&self, budget: &Budget) -> Result<View, String> {
        let rows = self.fetch(budget, &|u| {
            format!(
                "SELECT * FROM {}",
                u.url(&Partial::Catalog, "JSONEachRow", CATALOG_STRUCTURE)
            )
        })?;
        Ok(View::from_rows(rows.rows.into_iter().filter_map(|r| {
            let text = |i: usize| {
                r.get(i)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            let num = |i: usize| match r.get(i) {
                Some(Value::Number(n)) => n.as_u64(),
                Some(Value::String(s)) => s.parse().ok(),
                _ => None,
            };
            Some(CatalogRow {
                db: text(0),
                rp: text(1),
                duration_ns: num(2)?,
                is_default: num(3)? as u8,
                measurement: text(4),
                field: text(5),
                field_type: text(6),
                handed_by: num(7).unwrap_or(0),
            })
        })))
    }
}
