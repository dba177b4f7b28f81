//! The knee autoscaler. Its rules are pure: what a pod's knee is, from calibration and from
//! live windows ([`estimate`]), one pod's window from two scrapes ([`scrape`]), which pods'
//! windows count ([`pods`]), and how many replicas a tenant needs ([`decide`]); time is seconds
//! passed in, so every rule is unit-tested on synthetic load curves. The I/O is the scraper
//! (`scrape::HttpScrape`) and [`run`], the loop that scrapes the pods and reports.
//!
//! The rule for "a pod keeps up at this rate" is the load generator's knee rule
//! ([`sluice_core::knee`]): at least 99 % acknowledged, nothing dropped, p95 bounded.

pub mod decide;
pub mod estimate;
pub mod pods;
pub mod run;
pub mod scrape;
pub mod traffic;
pub mod trend;
