//! The columns of the shares this pod has gathered, kept by the shape's SQL: a gathering read
//! otherwise starts with a `DESCRIBE` of its own share (4-9 ms, more than a one-series read
//! takes on a pod). A shape carries no time range (`plan::Mode::Shape`), so a dashboard's
//! refreshes describe it once.
//!
//! A shape's SQL names every column it reads, with the tenant's field types (a pod whose table
//! has another type casts it, which changes the SQL), so the same SQL always has the same
//! columns: nothing here goes stale.

use std::collections::HashMap;
use std::sync::Mutex;

use super::gather::Structure;

/// Shapes kept at most; past it the cache starts again empty (a dashboard has tens).
pub const SHAPES_KEPT: usize = 512;

/// SQL bytes kept at most (a shape with a long list of series conditions can be large).
pub const SHAPE_BYTES_KEPT: usize = 4 << 20;

#[derive(Default)]
pub struct Shapes(Mutex<Kept>);

#[derive(Default)]
struct Kept {
    by_sql: HashMap<String, Structure>,
    bytes: usize,
}

impl Shapes {
    /// The structure of `sql`'s rows: as described before, or by `describe` now.
    pub fn structure(
        &self,
        sql: &str,
        describe: impl FnOnce() -> Result<Structure, String>,
    ) -> Result<Structure, String> {
        if let Some(s) = self.lock().by_sql.get(sql) {
            return Ok(s.clone());
        }
        let structure = describe()?;
        let mut kept = self.lock();
        let size = sql.len() + structure.bytes();
        if kept.by_sql.len() >= SHAPES_KEPT || kept.bytes + size > SHAPE_BYTES_KEPT {
            *kept = Kept::default();
        }
        if size <= SHAPE_BYTES_KEPT
            && kept
                .by_sql
                .insert(sql.to_string(), structure.clone())
                .is_none()
        {
            kept.bytes += size;
        }
        Ok(structure)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().by_sql.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A structure of one column.
    fn one(name: &str, ty: &str) -> Structure {
        Structure(vec![(format!("`{name}`"), ty.to_string())])
    }

    #[test]
    fn a_shape_is_described_once() {
        let shapes = Shapes::default();
        let mut asked = 0;
        for _ in 0..3 {
            let s = shapes
                .structure("SELECT 1 AS x", || {
                    asked += 1;
                    Ok(one("x", "UInt8"))
                })
                .unwrap();
            assert_eq!(s.text(), "`x` UInt8");
        }
        assert_eq!(asked, 1);
        // A failed description is not kept.
        assert!(shapes.structure("SELECT y", || Err("no y".into())).is_err());
        assert_eq!(
            shapes
                .structure("SELECT y", || Ok(one("y", "Int64")))
                .unwrap()
                .text(),
            "`y` Int64"
        );
    }

    #[test]
    fn the_cache_stays_bounded() {
        let shapes = Shapes::default();
        for i in 0..(SHAPES_KEPT * 2 + 3) {
            shapes
                .structure(&format!("SELECT {i}"), || Ok(one("x", "UInt64")))
                .unwrap();
        }
        assert!(shapes.len() <= SHAPES_KEPT);
        let big = "x".repeat(SHAPE_BYTES_KEPT / 2);
        for i in 0..5 {
            shapes
                .structure(&format!("{big}{i}"), || Ok(Structure::default()))
                .unwrap();
            assert!(shapes.lock().bytes <= SHAPE_BYTES_KEPT);
        }
    }
}
