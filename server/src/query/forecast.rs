//! The Holt-Winters fit behind `holt_winters()` and `holt_winters_with_fit()`: InfluxDB 1.8's
//! damped method, step for step, so that a forecast is the same number InfluxDB gives.
//!
//! The engine has no optimizer, so this is the one computation of a query done in Rust: over
//! the buckets the engine aggregated, one series at a time. The model's parameters are found
//! by a Nelder-Mead search from 16 starting points, up to 1,000 steps each, every step a pass
//! over the series; the searches run side by side on up to four threads at the priority of
//! the engine's query threads (below the write path), and the caller's deadline is checked at
//! every pass, so a long series or many of them end in the query's timeout instead of holding
//! threads.
//!
//! Three things make it InfluxDB's numbers rather than merely its method:
//! - the error function clamps the parameters it is given and overwrites their seasonal part
//!   in place, which changes the simplex the search walks; this keeps doing that;
//! - the forecast feeds its own previous value back, not the observation (only the squared
//!   error looks at the observations);
//! - `phi^t` is computed as Go's `math.Pow` computes it (repeated squaring of the mantissa),
//!   which differs from a libm `pow` in the last bit.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use super::go_pow::go_pow;

/// Starting guesses for alpha, beta, gamma and phi: 0.3 and 0.7 each (a grid of 16).
const GUESS_LOWER: f64 = 0.3;
const GUESS_UPPER: f64 = 1.0;
const GUESS_STEP: f64 = 0.4;
/// The weight of the first point in the non-seasonal starting level and trend.
const WEIGHT: f64 = 0.5;
/// The search stops when the spread of the simplex's errors is below this.
const EPSILON: f64 = 1.0e-4;
const MAX_ITERATIONS: usize = 1000;

/// Why a series has no forecast.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The fit ran past the query's deadline.
    Expired,
    /// The series spans this many intervals, more than [`MAX_SPAN`].
    TooLong(i64),
}

/// Most intervals a series may span from its first point to its last: the model holds a
/// value for each (a gap is a NaN), so points years apart in one-second buckets would fill
/// memory.
pub const MAX_SPAN: i64 = 1_000_000;

/// One `holt_winters(agg, h, m)` call: `h` values to forecast, a season of `m` intervals
/// (below 2: none), the points' `interval` in nanoseconds.
#[derive(Clone, Copy, Debug)]
pub struct Model {
    pub h: usize,
    pub m: usize,
    pub with_fit: bool,
    pub interval: i64,
}

impl Model {
    fn seasonal(&self) -> bool {
        self.m >= 2
    }

    /// The forecast of one series' points `(time, value)`, in time order: the `h` values
    /// after the last point, or with the fit, a value for every interval from the first
    /// point on. Too few points for the model: none.
    pub fn forecast(
        &self,
        points: &[(i64, f64)],
        deadline: Instant,
    ) -> Result<Vec<(i64, f64)>, Refused> {
        let l = points.len();
        if l < 2 || (self.seasonal() && l < self.m) || self.h == 0 {
            return Ok(vec![]);
        }
        let (first, last) = (points[0].0, points[l - 1].0);
        let span = self
            .round(last)
            .checked_sub(self.round(first))
            .map_or(i64::MAX, |d| d / self.interval);
        if span <= 0 {
            return Ok(vec![]);
        }
        if span > MAX_SPAN {
            return Err(Refused::TooLong(span));
        }
        let y = self.observations(points);
        let start = self.start(&y);
        let starts: Vec<Vec<f64>> = guesses()
            .into_iter()
            .map(|g| {
                let mut p = start.clone();
                p[..4].copy_from_slice(&g);
                p
            })
            .collect();
        let found = search_all(&y, self.seasonal(), deadline, &starts)?;
        // The first start with the least error, as InfluxDB keeps it searching them in turn.
        let mut best: Option<(f64, Vec<f64>)> = None;
        for (sse, params) in found {
            if best.as_ref().is_none_or(|(min, _)| sse < *min) {
                best = Some((sse, params));
            }
        }
        let fit = Fit {
            y: &y,
            seasonal: self.seasonal(),
            deadline,
            expired: false,
        };
        let Some((_, mut params)) = best else {
            return Ok(vec![]);
        };
        let forecasted = fit.run(self.h, &mut params);
        let keep = |(t, v): (i64, f64)| (!v.is_nan()).then_some((t, v));
        Ok(if self.with_fit {
            forecasted
                .into_iter()
                .enumerate()
                .map(|(i, v)| (first.wrapping_add(self.interval.wrapping_mul(i as i64)), v))
                .filter_map(keep)
                .collect()
        } else {
            forecasted[y.len()..]
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    (
                        last.wrapping_add(self.interval.wrapping_mul(i as i64 + 1)),
                        *v,
                    )
                })
                .filter_map(keep)
                .collect()
        })
    }

    /// A time rounded to the nearest interval (half an interval rounds down), with Go's
    /// truncating division.
    fn round(&self, t: i64) -> i64 {
        let down = t / self.interval;
        let n = if t % self.interval > self.interval / 2 {
            down + 1
        } else {
            down
        };
        n.wrapping_mul(self.interval)
    }

    /// One value per interval from the first point's: a later point of an interval already
    /// taken is dropped, an interval without one is NaN.
    fn observations(&self, points: &[(i64, f64)]) -> Vec<f64> {
        let mut y = vec![points[0].1];
        let mut t = self.round(points[0].0);
        for &(time, v) in &points[1..] {
            let rounded = self.round(time);
            if rounded <= t {
                continue;
            }
            t += self.interval;
            while rounded != t {
                y.push(f64::NAN);
                t += self.interval;
            }
            y.push(v);
        }
        y
    }

    /// The parameters before the search: `[alpha, beta, gamma, phi, level, trend, seasons...]`
    /// with the level, trend and seasons guessed from the first season or two points.
    fn start(&self, y: &[f64]) -> Vec<f64> {
        let m = self.m;
        let mut l0 = 0.0;
        let mut b0 = 0.0;
        if self.seasonal() {
            for v in y.iter().take(m).filter(|v| !v.is_nan()) {
                l0 += (1.0 / m as f64) * v;
            }
            for i in 0..m {
                if m + i >= y.len() {
                    break;
                }
                if !y[i].is_nan() && !y[m + i].is_nan() {
                    b0 += 1.0 / (m * m) as f64 * (y[m + i] - y[i]);
                }
            }
        } else {
            l0 += WEIGHT * y[0];
            if !y[1].is_nan() {
                b0 = WEIGHT * (y[1] - y[0]);
            }
        }
        let mut p = vec![0.0, 0.0, 0.0, 0.0, l0, b0];
        if self.seasonal() {
            p.extend(
                y.iter()
                    .take(m)
                    .map(|v| if v.is_nan() { 0.0 } else { v / l0 }),
            );
        }
        p
    }
}

/// The searches' starting smoothing factors `[alpha, beta, gamma, phi]`, in InfluxDB's order.
fn guesses() -> Vec<[f64; 4]> {
    let mut out = Vec::new();
    let mut alpha = GUESS_LOWER;
    while alpha < GUESS_UPPER {
        let mut beta = GUESS_LOWER;
        while beta < GUESS_UPPER {
            let mut gamma = GUESS_LOWER;
            while gamma < GUESS_UPPER {
                let mut phi = GUESS_LOWER;
                while phi < GUESS_UPPER {
                    out.push([alpha, beta, gamma, phi]);
                    phi += GUESS_STEP;
                }
                gamma += GUESS_STEP;
            }
            beta += GUESS_STEP;
        }
        alpha += GUESS_STEP;
    }
    out
}

/// Most threads one fit searches on.
const MAX_WORKERS: usize = 4;

/// A search from each of `starts`, on as many threads as the process may use (at most
/// [`MAX_WORKERS`]), each below the request path's priority like the engine's query threads:
/// the least error and where, in the starts' order. The searches share nothing, so the
/// answer is the one searching them in turn gives; on two cores it comes in about half the
/// time.
fn search_all(
    y: &[f64],
    seasonal: bool,
    deadline: Instant,
    starts: &[Vec<f64>],
) -> Result<Vec<(f64, Vec<f64>)>, Refused> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, MAX_WORKERS)
        .min(starts.len());
    let next = AtomicUsize::new(0);
    let search = || {
        crate::priority::lower_thread_priority(crate::engine::READER_NICE);
        let mut fit = Fit {
            y,
            seasonal,
            deadline,
            expired: false,
        };
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= starts.len() || fit.expired {
                break;
            }
            done.push((i, nelder_mead(&mut fit, &starts[i])));
        }
        (done, fit.expired)
    };
    let mut found: Vec<Option<(f64, Vec<f64>)>> = vec![None; starts.len()];
    let mut expired = false;
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..workers).map(|_| scope.spawn(search)).collect();
        for t in threads {
            let (done, late) = t
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            expired |= late;
            for (i, r) in done {
                found[i] = Some(r);
            }
        }
    });
    if expired {
        return Err(Refused::Expired);
    }
    Ok(found.into_iter().flatten().collect())
}

/// The model run over one series' observations.
struct Fit<'a> {
    y: &'a [f64],
    seasonal: bool,
    deadline: Instant,
    expired: bool,
}

impl Fit<'_> {
    /// The observations' span and `h` values on: each the previous one carried through the
    /// damped recursion. Clamps `params`' smoothing factors to [0, 1] and leaves its seasons
    /// as the run ends them, as InfluxDB does.
    fn run(&self, h: usize, params: &mut [f64]) -> Vec<f64> {
        for p in &mut params[..4] {
            *p = p.clamp(0.0, 1.0);
        }
        let (alpha, beta, gamma, phi) = (params[0], params[1], params[2], params[3]);
        let (mut l_t, mut b_t) = (params[4], params[5]);
        let seasons = &mut params[6..];
        let m = if self.seasonal { seasons.len() } else { 0 };
        if m == 1 {
            seasons[0] = 1.0;
        }
        let mut so = m.saturating_sub(1);
        let n = self.y.len() + h;
        let mut out = Vec::with_capacity(n);
        let mut y_t = self.y[0];
        out.push(y_t);
        let mut phi_h = phi;
        // Whether phi^t can still move phi_h (see `settled`).
        let mut damping = true;
        let (mut s_tm, mut s_tmh) = (1.0, 1.0);
        for t in 1..n {
            if m > 0 {
                let hm = t % m;
                s_tm = seasons[(t + so - m) % m];
                s_tmh = seasons[(t + hm + so - m) % m];
            }
            let l_prev = l_t;
            l_t = alpha * (y_t / s_tm) + (1.0 - alpha) * (l_prev + phi * b_t);
            let s_t = gamma * (y_t / (l_prev + phi * b_t)) + (1.0 - gamma) * s_tm;
            b_t = beta * (l_t - l_prev) + (1.0 - beta) * phi * b_t;
            y_t = (l_t + phi_h * b_t) * s_tmh;
            if damping {
                let p = go_pow(phi, t as u64);
                damping = !settled(phi, phi_h, p);
                phi_h += p;
            }
            if m > 0 {
                seasons[(t + so) % m] = s_t;
                so += 1;
            }
            out.push(y_t);
        }
        out
    }

    /// The squared error of the run with `params` against the observations (missing ones
    /// skipped, a NaN forecast infinite). Past the deadline: infinite, and marked.
    fn sse(&mut self, params: &mut [f64]) -> f64 {
        if self.expired || Instant::now() >= self.deadline {
            self.expired = true;
            return f64::INFINITY;
        }
        let forecasted = self.run(0, params);
        let mut sse = 0.0;
        for (f, y) in forecasted.iter().zip(self.y) {
            if y.is_nan() {
                continue;
            }
            if f.is_nan() {
                return f64::INFINITY;
            }
            let diff = f - y;
            sse += diff * diff;
        }
        sse
    }
}

/// Whether `phi_h` stays what it is for every later power of `phi` once `p` (its power at
/// some `t`) is added: half of what the profile showed the fit doing was `go_pow`, and most
/// of those powers had long stopped changing the sum.
///
/// For `0 <= phi < 1` the powers fall with `t`, and Go's `Pow` is within 1e-14 of the true
/// power, so no later power is twice `p`. With `p` at most a quarter of the spacing of
/// doubles above `phi_h` (a normal number), every later one is below half of it, and adding
/// it rounds back to `phi_h`: leaving them out changes no bit.
fn settled(phi: f64, phi_h: f64, p: f64) -> bool {
    if !(0.0..1.0).contains(&phi) || !phi_h.is_normal() || phi_h < 0.0 {
        return false;
    }
    let spacing = f64::from_bits(phi_h.to_bits() + 1) - phi_h;
    p <= spacing / 4.0
}

/// Nelder-Mead from `start` (reflection 1, contraction 0.5, expansion 2, scale 1): the least
/// error found and where.
fn nelder_mead(fit: &mut Fit, start: &[f64]) -> (f64, Vec<f64>) {
    const ALPHA: f64 = 1.0;
    const BETA: f64 = 0.5;
    const GAMMA: f64 = 2.0;
    let n = start.len();
    let mut v = simplex(start);
    let mut f: Vec<f64> = v.iter_mut().map(|x| fit.sse(x)).collect();
    let (mut vr, mut ve, mut vc, mut vm) = (vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    for _ in 0..MAX_ITERATIONS {
        if fit.expired {
            break;
        }
        let (vg, vs, vh) = ranks(&f);
        centroid(&v, vg, &mut vm);
        for i in 0..n {
            vr[i] = vm[i] + ALPHA * (vm[i] - v[vg][i]);
        }
        let fr = fit.sse(&mut vr);
        if fr < f[vh] && fr >= f[vs] {
            v[vg].copy_from_slice(&vr);
            f[vg] = fr;
        }
        if fr < f[vs] {
            for i in 0..n {
                ve[i] = vm[i] + GAMMA * (vr[i] - vm[i]);
            }
            let fe = fit.sse(&mut ve);
            if fe < fr {
                v[vg].copy_from_slice(&ve);
                f[vg] = fe;
            } else {
                v[vg].copy_from_slice(&vr);
                f[vg] = fr;
            }
        }
        if fr >= f[vh] {
            if fr < f[vg] && fr >= f[vh] {
                for i in 0..n {
                    vc[i] = vm[i] + BETA * (vr[i] - vm[i]);
                }
            } else {
                for i in 0..n {
                    vc[i] = vm[i] - BETA * (vm[i] - v[vg][i]);
                }
            }
            let fc = fit.sse(&mut vc);
            if fc < f[vg] {
                v[vg].copy_from_slice(&vc);
                f[vg] = fc;
            } else {
                // Halve every vertex's distance to the best one.
                let best = v[vs].clone();
                for (row, x) in v.iter_mut().enumerate() {
                    if row != vs {
                        for i in 0..n {
                            x[i] = best[i] + (x[i] - best[i]) / 2.0;
                        }
                    }
                }
                f[vg] = fit.sse(&mut v[vg]);
                f[vh] = fit.sse(&mut v[vh]);
            }
        }
        if spread(&f) < EPSILON {
            break;
        }
    }
    let (_, vs, _) = ranks(&f);
    let found = v[vs].clone();
    let min = fit.sse(&mut v[vs]);
    (min, found)
}

/// The starting simplex: `start` and a vertex a fixed step off it along each axis (scale 1).
fn simplex(start: &[f64]) -> Vec<Vec<f64>> {
    let n = start.len();
    let nf = n as f64;
    let pn = ((nf + 1.0).sqrt() - 1.0 + nf) / (nf * 2f64.sqrt());
    let qn = ((nf + 1.0).sqrt() - 1.0) / (nf * 2f64.sqrt());
    (0..=n)
        .map(|i| {
            (0..n)
                .map(|j| match i {
                    0 => start[j],
                    _ if i - 1 == j => pn + start[j],
                    _ => qn + start[j],
                })
                .collect()
        })
        .collect()
}

/// The vertices with the greatest, the least and the second greatest error, the first of
/// each in vertex order (the second greatest is the least one's when none is between).
fn ranks(f: &[f64]) -> (usize, usize, usize) {
    let (mut vg, mut vs) = (0, 0);
    for i in 0..f.len() {
        if f[i] > f[vg] {
            vg = i;
        }
        if f[i] < f[vs] {
            vs = i;
        }
    }
    let mut vh = vs;
    for i in 0..f.len() {
        if f[i] > f[vh] && f[i] < f[vg] {
            vh = i;
        }
    }
    (vg, vs, vh)
}

/// The centroid of every vertex but `vg`, into `vm`.
fn centroid(v: &[Vec<f64>], vg: usize, vm: &mut [f64]) {
    let nf = vm.len() as f64;
    for (i, m) in vm.iter_mut().enumerate() {
        let mut cent = 0.0;
        for (row, x) in v.iter().enumerate() {
            if row != vg {
                cent += x[i];
            }
        }
        *m = cent / nf;
    }
}

/// The standard deviation of the vertices' errors, as the search's stopping test computes it
/// (over n, for n + 1 vertices).
fn spread(f: &[f64]) -> f64 {
    let nf = (f.len() - 1) as f64;
    let mut sum = 0.0;
    for fi in f {
        sum += fi;
    }
    let favg = sum / (nf + 1.0);
    let mut s = 0.0;
    for fi in f {
        s += go_pow(fi - favg, 2) / nf;
    }
    s.sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn later() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    fn model(h: usize, m: usize, with_fit: bool) -> Model {
        Model {
            h,
            m,
            with_fit,
            interval: 10,
        }
    }

    #[test]
    fn leaving_out_the_settled_powers_changes_no_bit() {
        for phi in [
            0.0,
            1e-200,
            0.05,
            0.3,
            0.7000000000000001,
            0.95,
            0.999,
            0.99999,
            1.0,
        ] {
            let (mut all, mut skipping, mut damping) = (phi, phi, true);
            for t in 1..20_000u64 {
                all += go_pow(phi, t);
                if damping {
                    let p = go_pow(phi, t);
                    damping = !settled(phi, skipping, p);
                    skipping += p;
                }
                assert_eq!(all.to_bits(), skipping.to_bits(), "phi {phi}, t {t}");
            }
            // The sum settles within the 20,000 powers for these; 0 never moves it.
            assert_eq!(!damping, (1e-300..0.99).contains(&phi), "phi {phi}");
        }
    }

    #[test]
    fn too_few_points_forecast_nothing() {
        let one = [(0, 1.0)];
        assert!(model(3, 0, false)
            .forecast(&one, later())
            .unwrap()
            .is_empty());
        let three = [(0, 1.0), (10, 2.0), (20, 3.0)];
        assert!(model(3, 4, false)
            .forecast(&three, later())
            .unwrap()
            .is_empty());
        // Two points in one interval.
        assert!(model(3, 0, false)
            .forecast(&[(0, 1.0), (4, 2.0)], later())
            .unwrap()
            .is_empty());
    }

    #[test]
    fn a_forecast_continues_after_the_last_point_one_interval_apart() {
        let points: Vec<(i64, f64)> = (0..20).map(|i| (i * 10 + 3, 5.0 + i as f64)).collect();
        let out = model(4, 0, false).forecast(&points, later()).unwrap();
        let times: Vec<i64> = out.iter().map(|p| p.0).collect();
        assert_eq!(times, [203, 213, 223, 233]);
        // A rising line goes on rising.
        assert!(out.windows(2).all(|w| w[1].1 > w[0].1), "{out:?}");
        let fit = model(4, 0, true).forecast(&points, later()).unwrap();
        assert_eq!(fit.len(), 24);
        assert_eq!(fit[0], (3, 5.0));
    }

    #[test]
    fn missing_intervals_are_gaps_in_the_observations() {
        let m = model(1, 0, false);
        let y = m.observations(&[(0, 1.0), (4, 9.0), (31, 2.0)]);
        assert_eq!(y.len(), 4);
        assert_eq!(y[0], 1.0);
        assert!(y[1].is_nan() && y[2].is_nan());
        assert_eq!(y[3], 2.0);
    }

    #[test]
    fn a_fit_past_its_deadline_stops() {
        let points: Vec<(i64, f64)> = (0..50).map(|i| (i * 10, (i % 7) as f64)).collect();
        let gone = Instant::now() - Duration::from_millis(1);
        assert_eq!(
            model(5, 7, false).forecast(&points, gone),
            Err(Refused::Expired)
        );
    }

    #[test]
    fn a_series_spanning_too_many_intervals_is_refused_before_anything_is_held() {
        let points = [(0, 1.0), (10 * (MAX_SPAN + 1), 2.0)];
        assert_eq!(
            model(1, 0, false).forecast(&points, later()),
            Err(Refused::TooLong(MAX_SPAN + 1))
        );
        let far = [(i64::MIN + 5, 1.0), (i64::MAX - 5, 2.0)];
        assert!(model(1, 0, false).forecast(&far, later()).is_err());
    }

    /// InfluxDB 1.8.10's mean per 10 s of the compatibility data's `cpu` (2020-08-01, ten
    /// minutes), as it answered them.
    const MEANS: [f64; 60] = [
        22.0,
        59.20000000000001,
        63.06666666666667,
        33.6,
        70.46666666666665,
        40.666666666666664,
        44.53333333333334,
        81.4,
        18.599999999999998,
        55.79999999999999,
        42.0,
        29.2,
        66.39999999999999,
        36.93333333333333,
        40.46666666666666,
        77.33333333333333,
        14.533333333333333,
        51.400000000000006,
        88.59999999999998,
        25.8,
        62.0,
        65.86666666666667,
        36.4,
        73.6,
        21.2,
        52.75,
        90.0,
        26.75,
        64.0,
        51.25,
        32.0,
        69.2,
        39.73333333333334,
        43.6,
        80.46666666666665,
        17.333333333333332,
        54.53333333333334,
        58.06666666666667,
        28.6,
        65.8,
        35.333333333333336,
        39.2,
        76.4,
        13.6,
        50.46666666666666,
        87.5,
        24.53333333333333,
        61.4,
        65.26666666666667,
        35.800000000000004,
        72.0,
        42.53333333333333,
        46.400000000000006,
        83.6,
        20.46666666666667,
        57.333333333333336,
        61.20000000000001,
        31.399999999999995,
        68.60000000000001,
        55.800000000000004,
    ];

    #[test]
    fn forecasts_are_influxdbs_to_the_last_bit() {
        // InfluxDB's answers to holt_winters(mean("value"), 10, 2) and
        // holt_winters_with_fit(mean("value"), 3, 5) over those buckets.
        let forecast = [
            53.48852484199623,
            53.75862874864795,
            53.667628742786064,
            53.93840105803506,
            53.84717594624867,
            54.11861753647309,
            54.027167027222966,
            54.29927875774065,
            54.20760255984518,
            54.48038529490808,
        ];
        let points: Vec<(i64, f64)> = MEANS
            .iter()
            .enumerate()
            .map(|(i, v)| (1_596_240_000 + 10 * i as i64, *v))
            .collect();
        let m = Model {
            h: 10,
            m: 2,
            with_fit: false,
            interval: 10,
        };
        let got = m.forecast(&points, later()).unwrap();
        let values: Vec<f64> = got.iter().map(|p| p.1).collect();
        assert_eq!(values, forecast);
        assert_eq!(got[0].0, 1596240600);
        let m = Model {
            h: 3,
            m: 5,
            with_fit: true,
            interval: 10,
        };
        let got = m.forecast(&points, later()).unwrap();
        assert_eq!(got.len(), 63);
        assert_eq!(got[0], (1596240000, 22.0));
        assert_eq!(got[1], (1596240010, 51.17232623246901));
        assert_eq!(got[2], (1596240020, 60.4760580233708));
        assert_eq!(got[31], (1596240310, 51.257076593298436));
        assert_eq!(got[60], (1596240600, 39.36562978886655));
        assert_eq!(got[61], (1596240610, 51.27759974094997));
        assert_eq!(got[62], (1596240620, 60.60745961229038));
    }
}
