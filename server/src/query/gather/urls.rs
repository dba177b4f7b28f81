//! The SQL that reads the pods' shares: one `url()` over every pod, or over the others with
//! this pod's share computed in the same query.

use std::cell::Cell;
use std::net::SocketAddr;

use super::super::shape::Rows;
use crate::cluster::{self, Partial};

/// Where the peers are for one attempt: what `url()`s are built from.
pub struct Urls<'a> {
    pub(super) addrs: Vec<SocketAddr>,
    pub(super) token: &'a str,
    /// This pod's address among them, when known ([`crate::cluster::Cluster::own_addr`])
    /// and its share may be computed in place ([`Gather::output_on_threads`]).
    pub(super) own: Option<SocketAddr>,
    /// Set when [`Urls::url_with_own`] computed this pod's share in place.
    pub(super) used_own: Cell<bool>,
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

/// The columns of a share, as `DESCRIBE` names them: what a `url()` reads the pods' partials
/// as, and what this pod's own share is cast to when it is computed in place.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Structure(pub(in crate::query) Vec<(String, String)>);

impl Structure {
    /// From rows `(name, type, ...)` (`DESCRIBE`'s first columns).
    pub(in crate::query) fn of(rows: &Rows) -> Self {
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
}
