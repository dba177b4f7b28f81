//! The knee estimate's rules, on synthetic windows.

use super::*;

fn window(end_s: f64, offered: f64, acked: f64, p95: f64) -> Window {
    Window {
        pod: "p-0".into(),
        end_s,
        offered_pps: offered,
        acked_pps: acked,
        p95_ms: Some(p95),
        refused: 0,
        backlog_slope: 0.0,
        excluded: None,
    }
}

/// Windows `n` (ending at `10 n` s) in which the pod kept up at `pps`.
fn keep_up_every_10s(
    e: &mut Estimate,
    rules: &Rules,
    n: std::ops::RangeInclusive<u32>,
    pps: f64,
    p95: f64,
) {
    for i in n {
        let w = window(10.0 * f64::from(i), pps, pps, p95);
        assert_eq!(e.observe(&w, rules), Verdict::KeptUp);
    }
}

#[test]
fn keeping_up_raises_the_knee_and_falling_behind_caps_it() {
    let rules = Rules::new(100.0);
    let mut e = Estimate::calibrated(1_000_000.0, Some(30.0), 0.0);
    assert_eq!(e.knee(0.0, &rules), Some(1_000_000.0));
    assert_eq!(
        e.observe(&window(10.0, 1_500_000.0, 1_500_000.0, 30.0), &rules),
        Verdict::KeptUp
    );
    // A quarter of the way from the calibration to 1.5 M.
    assert_eq!(e.knee(10.0, &rules), Some(1_125_000.0));
    assert_eq!(
        e.evidence(10.0, &rules),
        Some(Evidence {
            at_s: 10.0,
            p95_ms: Some(30.0),
            source: Source::Live
        })
    );
    // Behind at 2 M: the knee stays under 90 % of it.
    assert_eq!(
        e.observe(&window(20.0, 2_000_000.0, 1_700_000.0, 400.0), &rules),
        Verdict::FellBehind
    );
    let k = e.knee(20.0, &rules).unwrap();
    assert!(k > 1_120_000.0 && k <= 1_800_000.0, "{k}");
    // p95 over the target alone is falling behind too.
    let mut e = Estimate::unknown();
    assert_eq!(
        e.observe(&window(1.0, 500_000.0, 500_000.0, 150.0), &rules),
        Verdict::FellBehind
    );
    assert_eq!(e.knee(1.0, &rules), Some(450_000.0));
    // Only an upper bound: no p95 "at the knee".
    assert_eq!(
        e.evidence(1.0, &rules),
        Some(Evidence {
            at_s: 1.0,
            p95_ms: None,
            source: Source::Live
        })
    );
    assert_eq!(Estimate::unknown().evidence(1.0, &rules), None);
}

#[test]
fn a_backlog_that_grows_or_refusals_mean_behind() {
    let rules = Rules::new(100.0);
    let mut e = Estimate::unknown();
    let mut w = window(1.0, 500_000.0, 500_000.0, 20.0);
    w.backlog_slope = 50_000_000.0;
    assert_eq!(e.observe(&w, &rules), Verdict::FellBehind);
    let mut w = window(2.0, 400_000.0, 400_000.0, 20.0);
    w.refused = 3;
    assert_eq!(e.observe(&w, &rules), Verdict::FellBehind);
}

#[test]
fn excluded_and_idle_windows_say_nothing() {
    let rules = Rules::new(100.0);
    let mut e = Estimate::calibrated(1_000_000.0, Some(30.0), 0.0);
    for x in [
        Exclusion::Warming,
        Exclusion::Settling,
        Exclusion::Draining,
        Exclusion::Restarted,
    ] {
        let mut w = window(1.0, 5_000_000.0, 10.0, 9_000.0);
        w.excluded = Some(x);
        assert_eq!(e.observe(&w, &rules), Verdict::Ignored(x));
    }
    assert_eq!(
        e.observe(&window(1.0, 10.0, 0.0, 900.0), &rules),
        Verdict::Ignored(Exclusion::Idle)
    );
    assert_eq!(e.knee(0.0, &rules), Some(1_000_000.0));
    assert_eq!(
        e.evidence(5.0, &rules),
        Some(Evidence {
            at_s: 0.0,
            p95_ms: Some(30.0),
            source: Source::Calibration
        })
    );
    // Keeping up below the calibrated knee says nothing new: it stays the calibration's.
    e.observe(&window(6.0, 400_000.0, 400_000.0, 20.0), &rules);
    assert_eq!(e.knee(6.0, &rules), Some(1_000_000.0));
    assert_eq!(
        e.evidence(6.0, &rules).map(|v| v.source),
        Some(Source::Calibration)
    );
}

#[test]
fn latency_alone_far_under_the_knee_is_left_out() {
    let rules = Rules::new(500.0);
    let mut e = Estimate::calibrated(14_000.0, Some(300.0), 0.0);
    // A fifth of the knee, p95 1.6 s, everything acknowledged: a merge or a backlog, not
    // capacity. The knee stays.
    assert_eq!(
        e.observe(&window(10.0, 1_200.0, 1_200.0, 1_638.0), &rules),
        Verdict::Ignored(Exclusion::Unloaded)
    );
    assert!(e.knee(10.0, &rules).is_some_and(|k| k > 13_900.0));
    // The same at two thirds of the knee counts.
    assert_eq!(
        e.observe(&window(20.0, 9_000.0, 9_000.0, 1_638.0), &rules),
        Verdict::FellBehind
    );
    assert!(e.knee(20.0, &rules).is_some_and(|k| k <= 8_100.0 + 1.0));
    // Falling behind on throughput counts at any rate, far under the knee once the pod
    // repeats it.
    let mut e = Estimate::calibrated(14_000.0, None, 0.0);
    for t in [10.0, 20.0] {
        assert_eq!(
            e.observe(&window(t, 1_200.0, 1_000.0, 1_638.0), &rules),
            Verdict::Ignored(Exclusion::Unconfirmed)
        );
    }
    assert_eq!(
        e.observe(&window(30.0, 1_200.0, 1_000.0, 1_638.0), &rules),
        Verdict::FellBehind
    );
    let mut e = Estimate::calibrated(14_000.0, None, 0.0);
    let mut w = window(11.0, 1_200.0, 1_200.0, 20.0);
    w.backlog_slope = 5_000_000.0;
    for _ in 1..CONFIRM_WINDOWS {
        assert_eq!(
            e.observe(&w, &rules),
            Verdict::Ignored(Exclusion::Unconfirmed)
        );
    }
    assert_eq!(e.observe(&w, &rules), Verdict::FellBehind);
}

/// A knee of about 15,000 points/s and a pod that falls behind for a window at 5,700 (a
/// third of it) while the tenant carries 4,950: counted at once, the knee would be 5,100,
/// and two pods would stay for what one carries at a third of its knee.
#[test]
fn one_window_behind_far_under_the_knee_does_not_take_it_down() {
    let rules = Rules::new(500.0);
    let mut e = Estimate::calibrated(14_856.0, Some(300.0), 0.0);
    let behind = window(10.0, 5_671.0, 5_200.0, 205.0);
    assert_eq!(
        e.observe(&behind, &rules),
        Verdict::Ignored(Exclusion::Unconfirmed)
    );
    // The pod keeps up again: the streak starts over, and the knee never moved.
    e.observe(&window(20.0, 2_500.0, 2_500.0, 40.0), &rules);
    for t in [30.0, 40.0] {
        let mut w = behind.clone();
        w.end_s = t;
        assert_eq!(
            e.observe(&w, &rules),
            Verdict::Ignored(Exclusion::Unconfirmed)
        );
    }
    assert!(
        e.knee(40.0, &rules).is_some_and(|k| k > 14_700.0),
        "only aged"
    );
    // Another pod's windows are its own streak.
    let mut other = behind.clone();
    other.pod = "p-1".into();
    other.end_s = 41.0;
    assert_eq!(
        e.observe(&other, &rules),
        Verdict::Ignored(Exclusion::Unconfirmed)
    );
    // The third window in a row of the same pod counts: its capacity fell.
    let mut w = behind.clone();
    w.end_s = 50.0;
    assert_eq!(e.observe(&w, &rules), Verdict::FellBehind);
    assert!(e
        .knee(50.0, &rules)
        .is_some_and(|k| k <= 0.9 * 5_671.0 + 1.0));
}

#[test]
fn evidence_ages_back_to_the_calibration() {
    let rules = Rules::new(100.0);
    // Without newer evidence the calibration stands, however old.
    let mut e = Estimate::calibrated(1_000_000.0, Some(30.0), 0.0);
    assert_eq!(e.knee(36_000.0, &rules), Some(1_000_000.0));
    // Kept up above it: back down to it by half the gap an hour.
    keep_up_every_10s(&mut e, &rules, 1..=12, 1_400_000.0, 20.0);
    let high = e.knee(120.0, &rules).unwrap();
    assert!(high > 1_350_000.0, "{high}");
    let later = e.knee(120.0 + 3_600.0, &rules).unwrap();
    let expected = 1_000_000.0 + (high - 1_000_000.0) / 2.0;
    assert!((later - expected).abs() < 1.0, "{later} vs {expected}");
    // Behind at 600,000: down at once, then back up by half the gap per five minutes.
    let mut e = Estimate::calibrated(1_000_000.0, Some(30.0), 0.0);
    e.observe(&window(10.0, 600_000.0, 500_000.0, 400.0), &rules);
    assert!(e.knee(10.0, &rules).is_some_and(|k| k <= 540_000.0 + 1.0));
    let k = e.knee(310.0, &rules).unwrap();
    assert!((k - 770_000.0).abs() < 1.0, "{k}");
    let k = e.knee(910.0, &rules).unwrap();
    assert!((k - 942_500.0).abs() < 1.0, "{k}");
}

/// The knee must not follow the load down. When a lower bound sank with age towards zero,
/// a steady load settled it at what each pod carried, and the forecast then asked for
/// more pods than the load needed, hour after hour.
#[test]
fn a_steady_load_keeps_the_knee_where_it_was_measured() {
    let rules = Rules::new(500.0);
    let mut e = Estimate::calibrated(12_000.0, Some(300.0), 0.0);
    // Four pods at 6,000 points/s each for three hours.
    for i in 1..=1_080 {
        let w = window(10.0 * f64::from(i), 6_000.0, 6_000.0, 40.0);
        assert_eq!(e.observe(&w, &rules), Verdict::KeptUp);
    }
    let k = e.knee(10_800.0, &rules).unwrap();
    assert_eq!(k, 12_000.0);
    assert_eq!((24_000.0 / (k * 0.7)).ceil(), 3.0);
    // Without a calibration, the highest knee live traffic showed is the anchor.
    let mut e = Estimate::unknown();
    e.observe(&window(10.0, 9_000.0, 9_000.0, 40.0), &rules);
    keep_up_every_10s(&mut e, &rules, 2..=1_080, 6_000.0, 40.0);
    assert_eq!(e.knee(10_800.0, &rules), Some(9_000.0));
}

/// The e2e mission's steady load: 40,700 points/s over 4 pods of a knee of 16,700, and one
/// pod that kept up at 21,600 for a window (more than its share of the connections). One
/// window moves the knee a little; only windows that keep coming take it all the way.
#[test]
fn one_lucky_window_moves_the_knee_a_quarter_of_the_way() {
    let rules = Rules::new(500.0);
    let mut e = Estimate::calibrated(16_700.0, Some(400.0), 0.0);
    e.observe(&window(10.0, 21_600.0, 21_600.0, 410.0), &rules);
    let once = e.knee(10.0, &rules).unwrap();
    assert!((17_900.0..18_000.0).contains(&once), "{once}");
    // Per pod at 70 % of that knee, 40,700 points/s still needs 4 pods.
    assert_eq!((40_700.0 / (once * 0.7)).ceil(), 4.0);
    keep_up_every_10s(&mut e, &rules, 2..=12, 21_600.0, 410.0);
    let sustained = e.knee(120.0, &rules).unwrap();
    assert!(sustained > 21_300.0, "{sustained}");
    // Falling behind brings it down at once.
    e.observe(&window(130.0, 21_600.0, 20_000.0, 1_638.0), &rules);
    assert!(e.knee(130.0, &rules).unwrap() <= 0.9 * 21_600.0 + 1.0);
}
