//! What one pod asks another for over the internal endpoint ([`super::PARTIAL_PATH`]).

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// What one pod asks another for. It travels base64-encoded in the query string (`url()`
/// reads with GET), so nothing in it can be read as part of the URL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Partial {
    /// Answers at once: whether a peer is there.
    Ping,
    /// The version of the pod's series table (text): what a gathering pod keeps a `SHOW`
    /// answer under ([`crate::query::remember`]).
    SeriesVersion,
    /// The pod's databases, policies, measurements and field types (`JSONEachRow`).
    Catalog,
    /// The pod's series of `db` (`db, measurement, tags` in `Native`): those of `measurement`
    /// (one per key set, or `every` one), or those that statement `statement` of `q` (a
    /// `SHOW`) selects, with `params` bound in it.
    Series {
        db: String,
        measurement: Option<String>,
        q: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        params: Option<String>,
        statement: usize,
        now: i64,
        /// Every series of `measurement`, for the groups `SLIMIT` counts; else one per key
        /// set, for the measurement's tag keys.
        #[serde(default)]
        every: bool,
    },
    /// The pod's distinct tag values (`measurement, k, v` in `Native`) that statement
    /// `statement` of `q` (a `SHOW TAG VALUES`, `params` bound in it) lists.
    TagValues {
        db: String,
        q: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        params: Option<String>,
        statement: usize,
        now: i64,
    },
    /// The pod's share of `SELECT` statement `statement` of `q` over one measurement, with the
    /// tenant's fields and tag keys of it (`Native`); `params` are bound in `q`.
    Select {
        q: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        params: Option<String>,
        statement: usize,
        db: String,
        rp: String,
        measurement: String,
        /// Field name to InfluxDB type name.
        fields: BTreeMap<String, String>,
        tag_keys: Vec<String>,
        now: i64,
        /// The gathering pod's view of the hand-offs under way (see [`crate::handoff`]), as
        /// pairs: an internally tagged enum cannot carry a map with number keys.
        #[serde(default)]
        handed: Vec<(u64, Vec<String>)>,
        /// `mean` and `sum` add their points in time order (`holt_winters()`'s input; see
        /// [`crate::query::plan::Source::ordered_sums`]).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        ordered_sums: bool,
    },
    /// A leaving pod's series rows, for the pod receiving its data (`Native`).
    HandoffSeries,
    /// A leaving pod's rows of `table` with series ids `lo..=hi`, for the pod receiving its
    /// data (`Native`).
    HandoffRows {
        table: String,
        columns: Vec<String>,
        lo: u64,
        hi: u64,
    },
    /// A `/sql` inner query, checked by the pod's guard again (`Native`), with the gathering
    /// pod's view of the hand-offs under way (as in `Select`).
    Sql {
        q: String,
        #[serde(default)]
        handed: Vec<(u64, Vec<String>)>,
    },
    /// The columns of a `/sql` inner query on this pod (`name, type` in `JSONEachRow`;
    /// nothing when the pod cannot run it, for example without the table).
    DescribeSql { q: String },
}

impl Partial {
    /// `self` without the time it was asked at, where the answer does not depend on it: the
    /// series a `SHOW` lists (time conditions select nothing, see
    /// [`crate::query::meta::series_filter`]; the gathering pod checks the statement with the
    /// request's time before it asks), or a measurement's series. What a gathering pod keeps
    /// such an answer by ([`crate::query::remember`]).
    pub fn timeless(&self) -> Partial {
        let mut p = self.clone();
        if let Partial::Series { now, .. } | Partial::TagValues { now, .. } = &mut p {
            *now = 0;
        }
        p
    }

    pub fn encode(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
    }

    pub fn decode(s: &str) -> Result<Self, String> {
        let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(s)
            .map_err(|e| format!("bad partial request encoding: {e}"))?;
        serde_json::from_slice(&json).map_err(|e| format!("bad partial request: {e}"))
    }
}
