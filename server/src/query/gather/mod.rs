//! The gathering pod's side of a read across the tenant: its engine reads every other pod's
//! partial through one `url()` over them (fetched in parallel), computes its own in the same
//! query where it can ([`Urls::url_with_own`]), and finishes the work itself: the merge is
//! ClickHouse's, as in its Distributed engine.
//!
//! A pod that does not answer is an error naming it, since a missing pod biases sums and
//! means, not just the list of series; with `partial=true` it is left out and the answer
//! says so. A pod that answers with an error (a 404 included) is always an error.
//!
//! Its parts: [`urls`] builds the `url()` reads (and this pod's share in place), [`versions`]
//! keeps `SHOW` answers while every pod's series are unchanged, [`view_cache`] gathers and
//! reuses the tenant's catalog, and [`tenant_sql`] is `/sql` across the tenant.

mod tenant_sql;
mod urls;
mod versions;
mod view_cache;

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;

use serde_json::Value;

use super::fetch::output_on;
use super::shape::Rows;
use super::{fetch_on, shape, Budget};
use crate::app::App;
use crate::cluster::{self, Partial, Peer};
use crate::engine::Readers;

pub use tenant_sql::{tenant_sql, HANDOFF_UNDER_WAY};
pub use urls::{Structure, Urls};
pub use view_cache::{ViewCache, VIEW_TTL};

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
                self.app
                    .metrics
                    .read_retried(crate::metrics::READ_RETRY_OWN_SHARE);
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
