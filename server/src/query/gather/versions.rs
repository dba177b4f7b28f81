//! `SHOW` answers kept across the tenant while every pod's series table is unchanged, and
//! how this pod learns its own address among the pods from their series versions.

use std::net::SocketAddr;

use super::super::Budget;
use super::{Gather, Urls};
use crate::cluster::{self, Partial};

impl Gather<'_> {
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
        // This pod's own is asked like another's when its learned address is due a check.
        let check = self.app.cluster.own_addr_to_check();
        let ask = |a: &SocketAddr| {
            if Some(*a) == own && check != Some(*a) {
                return Some(format!("{a}={local} "));
            }
            let checked = |ours: bool| {
                if !ours && check == Some(*a) {
                    self.app.cluster.forget_own_addr(*a);
                }
            };
            let url = format!("http://{a}{}?p={what}", cluster::PARTIAL_PATH);
            let answer = self
                .app
                .peer_agent
                .get(&url)
                .timeout(wait)
                .set("Authorization", &auth)
                .call()
                .ok()
                .and_then(|r| r.into_string().ok());
            let Some(v) = answer
                .as_deref()
                .map(str::trim)
                .filter(|v| is_series_version(v))
            else {
                checked(false);
                return None;
            };
            let ours = v.split('.').next() == Some(boot);
            if ours {
                self.app.cluster.learn_own_addr(*a);
            }
            checked(ours);
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
    /// it does not, and has not looked lately, or its learned address is due a check
    /// ([`crate::cluster::OWN_ADDR_CHECK`]), it asks every pod's series version, which tells
    /// it.
    pub fn knows_own(&self) -> bool {
        let addrs: Vec<SocketAddr> = self.peers.borrow().iter().filter_map(|p| p.addr).collect();
        if self.app.cluster.should_look_for_own_addr(&addrs)
            || self.app.cluster.own_addr_check_due()
        {
            let _ = self.series_versions();
        }
        self.own().is_some_and(|a| addrs.contains(&a))
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
