//! The gathering pod's side of a read across the tenant: its engine reads every other pod's
//! partial through one `url()` over them (fetched in parallel), computes its own in the same
//! query where it can ([`Urls::url_with_own`]), and finishes the work itself: the merge is
//! ClickHouse's, as in its Distributed engine.
//!
//! A pod that does not answer is an error naming it, since a missing pod biases sums and
//! means, not just the list of series; with `partial=true` it is left out and the answer
//! says so. A pod that answers with an error (a 404 included) is always an error.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::fetch::output_on;
use super::shape::Rows;
use super::view::{CatalogRow, View, CATALOG_STRUCTURE};
use super::{fetch_on, shape, Budget};
use crate::app::App;
use crate::cluster::{self, Partial, Peer};
use crate::engine::Readers;

/// Where the peers are for one attempt: what `url()`s are built from.
pub struct Urls<'a> {
    addrs: Vec<SocketAddr>,
    token: &'a str,
    /// This pod's address among them, when known ([`crate::cluster::Cluster::own_addr`])
    /// and its share may be computed in place ([`Gather::output_on_threads`]).
    own: Option<SocketAddr>,
    /// Set when [`Urls::url_with_own`] computed this pod's share in place.
    used_own: Cell<bool>,
}

impl Urls<'_> {
    /// `url()` reading `what` from every pod at once.
    pub fn url(&self, what: &Partial, format: &str, structure: &str) -> String {
        cluster::url_sql(&self.addrs, what, format, structure, self.token)
    }

    /// [`Urls::url`] in `Native`, except that this pod's share is `own_sql` (the SQL its
    /// internal endpoint would run for `what`), computed within the gathering query: the
    /// gathering pod then runs one query instead of two, and its share crosses no socket.
    /// Where this pod is not known among the pods asked, or `own_sql` is `None`, every pod
    /// is read over `url()`.
    ///
    /// The share's columns are cast to `structure` by name, as `url()` reads the others', so
    /// that a share planned otherwise here fails loudly instead of merging other columns.
    pub fn url_with_own(
        &self,
        what: &Partial,
        structure: &Structure,
        own_sql: Option<&str>,
    ) -> String {
        let text = structure.text();
        let (Some(own), Some(own_sql)) = (self.own, own_sql) else {
            return self.url(what, "Native", &text);
        };
        if !self.addrs.contains(&own) {
            return self.url(what, "Native", &text);
        }
        self.used_own.set(true);
        let others: Vec<SocketAddr> = self.addrs.iter().copied().filter(|a| *a != own).collect();
        let own_part = format!("SELECT {} FROM ({own_sql})", structure.casts());
        if others.is_empty() {
            return format!("({own_part})");
        }
        let url = cluster::url_sql(&others, what, "Native", &text, self.token);
        format!("(SELECT * FROM {url} UNION ALL {own_part})")
    }
}

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

pub struct Gather<'a> {
    app: &'a App,
    token: String,
    /// The tenant's pods by name, as configured for this request.
    names: Vec<String>,
    /// The pods still asked.
    peers: RefCell<Vec<Peer>>,
    partial: bool,
    /// The pods left out (`partial=true`), by name.
    missing: RefCell<Vec<String>>,
    /// Whether this pod's share may be computed in place ([`Urls::url_with_own`]): cleared
    /// when a read that did so failed without naming a pod.
    inline_own: Cell<bool>,
}

impl<'a> Gather<'a> {
    /// `None` when this pod answers alone: no token, or fewer than two pods.
    pub fn new(app: &'a App, partial: bool) -> Option<Self> {
        let token = app.cluster.token()?.to_string();
        if !app.engine.gathers() {
            return None;
        }
        let names = app.cluster.peers();
        if names.len() < 2 {
            return None;
        }
        Some(Self {
            app,
            token,
            peers: RefCell::new(app.cluster.resolve(&names)),
            names,
            partial,
            missing: RefCell::new(Vec::new()),
            inline_own: Cell::new(true),
        })
    }

    /// Where the pods still asked are.
    pub fn urls(&self) -> Urls<'_> {
        Urls {
            addrs: self.peers.borrow().iter().filter_map(|p| p.addr).collect(),
            token: &self.token,
            own: self.own(),
            used_own: Cell::new(false),
        }
    }

    pub fn missing(&self) -> Vec<String> {
        self.missing.borrow().clone()
    }

    /// Runs the SQL `build` makes over the pods still asked, leaving out (with
    /// `partial=true`) those that do not answer and trying again without them.
    pub fn fetch(&self, budget: &Budget, build: &dyn Fn(&Urls) -> String) -> Result<Rows, String> {
        self.fetch_on_threads(budget, false, build)
    }

    /// [`Gather::fetch`], on one thread when `one_thread`: the pods are then read one after
    /// the other, and what the gathering pod does over every point (`integral()` orders them
    /// all) has a query's memory to itself rather than a share of it per thread.
    pub fn fetch_on_threads(
        &self,
        budget: &Budget,
        one_thread: bool,
        build: &dyn Fn(&Urls) -> String,
    ) -> Result<Rows, String> {
        shape::parse_rows(&self.output_on_threads(budget, one_thread, build)?)
    }

    /// [`Gather::fetch`]'s rows as the engine wrote them (see [`super::fetch::output_on`]).
    pub fn output(
        &self,
        budget: &Budget,
        build: &dyn Fn(&Urls) -> String,
    ) -> Result<Vec<u8>, String> {
        self.output_on_threads(budget, false, build)
    }

    /// The SQL `sql` makes of the `url()` reading `what` (in `Native`, as `structure`) from
    /// every pod, where `what` reads the pods' series tables alone (the `SHOW` statements):
    /// kept while every pod's series table is unchanged, as each pod says before the read
    /// ([`super::remember::SeriesAnswers`]). Not kept when a pod was left out.
    pub fn series_output(
        &self,
        budget: &Budget,
        what: &Partial,
        structure: &str,
        sql: &dyn Fn(&str) -> String,
    ) -> Result<Vec<u8>, String> {
        let build = |u: &Urls| sql(&u.url(what, "Native", structure));
        let Some(versions) = self.series_versions() else {
            return self.output(budget, &build);
        };
        let key = sql(&self.urls().url(&what.timeless(), "Native", structure));
        let answers = &self.app.series_answers;
        if let Some(out) = answers.kept_for_tenant(&key, &versions) {
            budget.take(out.len())?;
            return Ok(out.to_vec());
        }
        let out = self.output(budget, &build)?;
        let whole = self.missing.borrow().is_empty();
        answers.read_for_tenant(&key, versions, whole.then(|| out.as_slice().into()));
        Ok(out)
    }

    /// Every pod's [`crate::engine::Engine::series_version`] with its address, asked of all
    /// of them at once (this pod's own without asking, once it knows its address); `None`
    /// when one does not answer within the connect timeout, or cannot say (an older
    /// release): the read then runs as always, and names what is wrong.
    fn series_versions(&self) -> Option<String> {
        let addrs: Vec<SocketAddr> = self
            .peers
            .borrow()
            .iter()
            .map(|p| p.addr)
            .collect::<Option<_>>()?;
        let own = self.app.cluster.own_addr();
        let local = self.app.engine.series_version();
        let boot = local.split('.').next().unwrap_or_default();
        let what = Partial::SeriesVersion.encode();
        let wait = self.app.cfg.cluster.connect_timeout;
        let auth = format!("Bearer {}", self.token);
        let ask = |a: &SocketAddr| {
            if Some(*a) == own {
                return Some(format!("{a}={local} "));
            }
            let url = format!("http://{a}{}?p={what}", cluster::PARTIAL_PATH);
            let r = self
                .app
                .peer_agent
                .get(&url)
                .timeout(wait)
                .set("Authorization", &auth)
                .call()
                .ok()?;
            let v = r.into_string().ok()?;
            let v = v.trim();
            if !is_series_version(v) {
                return None;
            }
            if v.split('.').next() == Some(boot) {
                self.app.cluster.learn_own_addr(*a);
            }
            Some(format!("{a}={v} "))
        };
        // This pod's own and one other pod's on this thread, the others' on a thread each,
        // so that the pods answer side by side.
        let here = addrs.iter().position(|a| Some(*a) != own);
        let ask = &ask;
        let versions: Vec<Option<String>> = std::thread::scope(|s| {
            let pending: Vec<_> = addrs
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    (Some(*a) != own && Some(i) != here).then(|| {
                        std::thread::Builder::new()
                            .name("peer-version".into())
                            .spawn_scoped(s, move || ask(a))
                            .ok()
                    })
                })
                .collect();
            addrs
                .iter()
                .zip(pending)
                .map(|(a, p)| match p {
                    None => ask(a),
                    Some(h) => h.and_then(|h| h.join().ok()).flatten(),
                })
                .collect()
        });
        versions.into_iter().collect()
    }

    /// Whether this pod knows its own address among the pods ([`Urls::url_with_own`]); when
    /// it does not, and has not looked lately, it asks every pod's series version, which
    /// tells it.
    pub fn knows_own(&self) -> bool {
        let addrs: Vec<SocketAddr> = self.peers.borrow().iter().filter_map(|p| p.addr).collect();
        if self.app.cluster.should_look_for_own_addr(&addrs) {
            let _ = self.series_versions();
        }
        self.own().is_some_and(|a| addrs.contains(&a))
    }

    /// This pod's address among the pods, when its share may be computed in place.
    fn own(&self) -> Option<SocketAddr> {
        self.inline_own
            .get()
            .then(|| self.app.cluster.own_addr())
            .flatten()
    }

    /// The pods asked whose address `msg` names.
    fn named_in(&self, msg: &str) -> Vec<Peer> {
        self.peers
            .borrow()
            .iter()
            .filter(|p| p.addr.is_some_and(|a| msg.contains(&a.to_string())))
            .cloned()
            .collect()
    }

    fn output_on_threads(
        &self,
        budget: &Budget,
        one_thread: bool,
        build: &dyn Fn(&Urls) -> String,
    ) -> Result<Vec<u8>, String> {
        loop {
            let unresolved: Vec<Peer> = self
                .peers
                .borrow()
                .iter()
                .filter(|p| p.addr.is_none())
                .cloned()
                .collect();
            if !unresolved.is_empty() {
                self.leave_out(unresolved, "its name does not resolve")?;
                continue;
            }
            let addrs: Vec<SocketAddr> =
                self.peers.borrow().iter().filter_map(|p| p.addr).collect();
            let n = addrs.len();
            let urls = Urls {
                addrs,
                token: &self.token,
                own: self.own(),
                used_own: Cell::new(false),
            };
            // One thread per pod, so that the fetches run side by side.
            let threads = if one_thread { 1 } else { n.max(2) };
            let sql = format!("{} SETTINGS max_threads = {threads}", build(&urls));
            let msg = match output_on(self.app, budget, Readers::Gather, &sql) {
                Ok(out) => return Ok(out),
                Err(msg) => msg,
            };
            if let Some(peer) = self.answered_with_error(&msg) {
                return Err(format!("pod {} answered with an error: {msg}", peer.name));
            }
            if urls.used_own.get()
                && self.named_in(&msg).is_empty()
                && !msg.contains("TIMEOUT_EXCEEDED")
            {
                // This pod's own share, computed in place, may have failed: asked over
                // `url()` like the others, its error names it (and a share that ran out of
                // memory on two threads runs again on one, as the endpoint does).
                tracing::debug!(error = %msg, "reading again with this pod's share over url()");
                self.inline_own.set(false);
                continue;
            }
            let failed = self.unreachable(&msg);
            if failed.is_empty() {
                return Err(msg);
            }
            self.leave_out(failed, &msg)?;
        }
    }

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

    /// The pod whose own error answer `msg` reports (the engine quotes the URL it fetched).
    fn answered_with_error(&self, msg: &str) -> Option<Peer> {
        if !msg.contains("Received error from remote server") {
            return None;
        }
        self.peers
            .borrow()
            .iter()
            .find(|p| {
                p.addr
                    .is_some_and(|a| msg.contains(&format!("http://{a}/")))
            })
            .cloned()
    }

    /// The pods that did not answer: those `msg` names, or else those that do not answer a
    /// ping now.
    fn unreachable(&self, msg: &str) -> Vec<Peer> {
        let named = self.named_in(msg);
        if !named.is_empty() {
            return named;
        }
        let peers = self.peers.borrow().clone();
        peers.into_iter().filter(|p| !self.answers(p)).collect()
    }

    /// Whether `p` answers a ping now, within the connect timeout (a pod that accepts the
    /// connection but does not answer, stopped or overloaded, counts as not answering).
    fn answers(&self, p: &Peer) -> bool {
        let Some(a) = p.addr else {
            return false;
        };
        let wait = self.app.cfg.cluster.connect_timeout.as_secs_f64();
        let sql = format!(
            "SELECT raw FROM {} SETTINGS http_receive_timeout = {wait}",
            cluster::url_sql(&[a], &Partial::Ping, "RawBLOB", "raw String", &self.token)
        );
        fetch_on(self.app, &Budget::new(1 << 16), Readers::Gather, &sql).is_ok_and(|rows| {
            rows.rows
                .first()
                .and_then(|r| r.first())
                .and_then(Value::as_str)
                == Some("ok")
        })
    }

    fn leave_out(&self, failed: Vec<Peer>, why: &str) -> Result<(), String> {
        let names: Vec<String> = failed.iter().map(|p| p.name.clone()).collect();
        let list = names.join(", ");
        if !self.partial {
            return Err(format!(
                "pod {list} of the tenant did not answer ({why}); without it the answer would miss its data: retry, or add partial=true to accept an answer without it"
            ));
        }
        self.peers.borrow_mut().retain(|p| !failed.contains(p));
        if self.peers.borrow().is_empty() {
            return Err(format!("no pod of the tenant answered ({why})"));
        }
        self.missing.borrow_mut().extend(names);
        tracing::warn!(pods = %list, reason = why, "answering without pods that do not answer (partial=true)");
        Ok(())
    }
}

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
            let budget = Budget::new(app.cfg.query.max_result_bytes.0);
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

/// The columns of a share, as `DESCRIBE` names them: what a `url()` reads the pods' partials
/// as, and what this pod's own share is cast to when it is computed in place.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Structure(pub(super) Vec<(String, String)>);

impl Structure {
    /// From rows `(name, type, ...)` (`DESCRIBE`'s first columns).
    pub(super) fn of(rows: &Rows) -> Self {
        Self(
            rows.rows
                .iter()
                .filter_map(|r| {
                    Some((
                        sluice_core::names::quote_ident(r.first()?.as_str()?),
                        r.get(1)?.as_str()?.to_string(),
                    ))
                })
                .collect(),
        )
    }

    /// `name type, ...`, a `url()`'s structure.
    pub fn text(&self) -> String {
        let cols: Vec<String> = self.0.iter().map(|(n, t)| format!("{n} {t}")).collect();
        cols.join(", ")
    }

    /// `CAST(name AS type) AS name, ...`.
    fn casts(&self) -> String {
        let cols: Vec<String> = self
            .0
            .iter()
            .map(|(n, t)| format!("CAST({n} AS {t}) AS {n}"))
            .collect();
        cols.join(", ")
    }

    /// The bytes its names and types take.
    pub fn bytes(&self) -> usize {
        self.0.iter().map(|(n, t)| n.len() + t.len()).sum()
    }
}

/// Whether `v` is what [`crate::engine::Engine::series_version`] writes (hex, a dot, digits):
/// a peer's answer becomes part of what a kept answer is held under, and must stay small.
fn is_series_version(v: &str) -> bool {
    let Some((boot, writes)) = v.split_once('.') else {
        return false;
    };
    (1..=16).contains(&boot.len())
        && (1..=20).contains(&writes.len())
        && boot.bytes().all(|b| b.is_ascii_hexdigit())
        && writes.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gathering query computes this pod's share itself only when it knows which of the
    /// pods asked it is, and reads every other pod as before.
    #[test]
    fn this_pods_share_is_computed_in_place_and_the_others_are_read() {
        let a: SocketAddr = "10.0.0.1:8086".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:8086".parse().unwrap();
        let what = Partial::Ping;
        let urls = |addrs: Vec<SocketAddr>, own: Option<SocketAddr>| Urls {
            addrs,
            token: "t",
            own,
            used_own: Cell::new(false),
        };
        let own_sql = Some("SELECT 1 AS x");
        let structure = &Structure(vec![("`x`".into(), "UInt8".into())]);
        let u = urls(vec![a, b], Some(a));
        let both = u.url_with_own(&what, structure, own_sql);
        assert!(u.used_own.get());
        assert!(both.contains("url('http://10.0.0.2:8086/"), "{both}");
        assert!(!both.contains("10.0.0.1"), "{both}");
        assert!(
            both.ends_with("UNION ALL SELECT CAST(`x` AS UInt8) AS `x` FROM (SELECT 1 AS x))"),
            "{both}"
        );
        assert_eq!(
            urls(vec![a], Some(a)).url_with_own(&what, structure, own_sql),
            "(SELECT CAST(`x` AS UInt8) AS `x` FROM (SELECT 1 AS x))",
            "a tenant left with this pod alone (partial=true) reads no url()"
        );
        let elsewhere: SocketAddr = "10.0.0.3:8086".parse().unwrap();
        for (own, sql) in [(None, own_sql), (Some(a), None), (Some(elsewhere), own_sql)] {
            let u = urls(vec![a, b], own);
            let every = u.url(&what, "Native", "`x` UInt8");
            assert_eq!(
                u.url_with_own(&what, structure, sql),
                every,
                "own {own:?}, share {sql:?}: every pod over url()"
            );
            assert!(!u.used_own.get());
        }
    }

    #[test]
    fn only_a_series_version_is_taken_from_a_peer() {
        assert!(is_series_version("9f3a.12"));
        for bad in [
            "",
            "12",
            "9f3a.",
            ".12",
            "9f3a.1x",
            "zz.1",
            "ok",
            &"a".repeat(17),
            "1.2.3",
        ] {
            assert!(!is_series_version(bad), "{bad}");
        }
    }
}
