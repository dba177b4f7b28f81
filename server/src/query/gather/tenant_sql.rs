//! `/sql` across the tenant: an inner query run on every pod, an outer one over their union.

use super::super::{fetch_on, Budget};
use super::{Gather, Structure};
use crate::app::App;
use crate::cluster::Partial;
use crate::engine::Readers;

/// Why `/sql` across the tenant with `merge()` waits while a hand-off is under way (answered
/// 503): `merge()` reads tables by pattern, past the row filters that count each row once.
pub const HANDOFF_UNDER_WAY: &str = "a pod of the tenant is handing its data to another (a scale-down), and merge() reads tables past the filters that count each row once: retry when it has settled, or name the tables";

/// The columns of a `/sql` inner query as the pods describe it.
const DESCRIBE_STRUCTURE: &str = "name String, type String, position UInt32";

/// `/sql` across the tenant: `outer` reads every pod's answer to `inner` as the table
/// `tenant` (on a pod that answers alone, its own answer). Both were checked by the guard;
/// the pods check `inner` again. Returns the SQL and the pods left out (`partial`).
///
/// During a hand-off every pod reads its tables under row filters from this pod's view of it
/// (see [`crate::query::partial::sql_filters`]), so each row counts once, as in InfluxQL;
/// `merges` (the inner query calls `merge()`, which the filters cannot reach) waits instead.
pub fn tenant_sql(
    app: &App,
    inner: &str,
    outer: &str,
    partial: bool,
    merges: bool,
) -> Result<(String, Vec<String>), String> {
    let inner = inner.trim().trim_end_matches(';');
    let outer = outer.trim().trim_end_matches(';').trim_end();
    let (table, threads, missing) = match Gather::new(app, partial) {
        None => (format!("({inner})"), 2, vec![]),
        Some(g) => {
            let budget = Budget::for_request(&app.cfg.query);
            let view = g.view(&budget)?;
            if merges && view.handoff_under_way() {
                return Err(HANDOFF_UNDER_WAY.into());
            }
            let handed = crate::handoff::to_pairs(view.handed());
            let describe = Partial::DescribeSql { q: inner.into() };
            let rows = g.fetch(&budget, &|u| {
                format!(
                    "SELECT name, any(type), min(position) AS p FROM {} GROUP BY name ORDER BY p",
                    u.url(&describe, "JSONEachRow", DESCRIBE_STRUCTURE)
                )
            })?;
            let structure = Structure::of(&rows).text();
            if structure.is_empty() {
                // No pod can run it: this pod's engine says why.
                let why = fetch_on(
                    app,
                    &budget,
                    Readers::Local,
                    &format!("SELECT * FROM ({inner}) LIMIT 0"),
                )
                .err()
                .unwrap_or_else(|| "it returns no columns".into());
                return Err(format!(
                    "no pod of the tenant can run the inner query: {why}"
                ));
            }
            let run = Partial::Sql {
                q: inner.into(),
                handed,
            };
            let urls = g.urls();
            let n = urls.addrs.len();
            (
                format!("(SELECT * FROM {})", urls.url(&run, "Native", &structure)),
                n.max(2),
                g.missing(),
            )
        }
    };
    let with = match outer.get(..5) {
        Some(w) if w.eq_ignore_ascii_case("with ") => {
            format!("WITH tenant AS {table}, {}", &outer[5..])
        }
        _ => format!("WITH tenant AS {table} {outer}"),
    };
    Ok((format!("{with} SETTINGS max_threads = {threads}"), missing))
}
