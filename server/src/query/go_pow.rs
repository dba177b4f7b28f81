//! Go's `math.Pow` for a whole non-negative exponent, bit for bit: InfluxDB's Holt-Winters
//! fit ([`super::forecast`]) adds up `phi^t` with it, and for most arguments it differs from
//! the libm power in the last bit.

/// `x` to the power `y` as Go's `math.Pow` computes it for a whole non-negative `y`: the
/// mantissa squared repeatedly and multiplied in by the bits of `y`, the exponent apart.
pub(super) fn go_pow(x: f64, y: u64) -> f64 {
    if y == 0 || x == 1.0 {
        return 1.0;
    }
    if y == 1 {
        return x;
    }
    if x.is_nan() {
        return f64::NAN;
    }
    let odd = y % 2 == 1;
    if x == 0.0 {
        return if x.is_sign_negative() && odd { x } else { 0.0 };
    }
    if x.is_infinite() {
        return if x < 0.0 && odd {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        };
    }
    let (mut a1, mut ae) = (1.0, 0i64);
    let (mut x1, mut xe) = frexp(x);
    let mut i = y;
    while i != 0 {
        if !(-(1 << 12)..=(1 << 12)).contains(&xe) {
            ae += xe;
            break;
        }
        if i & 1 == 1 {
            a1 *= x1;
            ae += xe;
        }
        x1 *= x1;
        xe <<= 1;
        if x1 < 0.5 {
            x1 += x1;
            xe -= 1;
        }
        i >>= 1;
    }
    ldexp(a1, ae)
}

const MASK: u64 = 0x7FF;
const SHIFT: u32 = 52;
const BIAS: i64 = 1023;

/// A subnormal `x` scaled to a normal number, and the power of two taken out.
fn normalize(x: f64) -> (f64, i64) {
    if x.abs() < f64::MIN_POSITIVE {
        (x * (1u64 << 52) as f64, -52)
    } else {
        (x, 0)
    }
}

/// `x` as a fraction in [0.5, 1) and a power of two (Go's `math.Frexp`).
fn frexp(x: f64) -> (f64, i64) {
    if x == 0.0 || !x.is_finite() {
        return (x, 0);
    }
    let (f, mut exp) = normalize(x);
    let mut bits = f.to_bits();
    exp += ((bits >> SHIFT) & MASK) as i64 - BIAS + 1;
    bits &= !(MASK << SHIFT);
    bits |= ((BIAS - 1) as u64) << SHIFT;
    (f64::from_bits(bits), exp)
}

/// `frac * 2^exp` (Go's `math.Ldexp`, which rounds a subnormal result once).
fn ldexp(frac: f64, exp: i64) -> f64 {
    if frac == 0.0 || !frac.is_finite() {
        return frac;
    }
    let (frac, e) = normalize(frac);
    let mut bits = frac.to_bits();
    let exp = exp + e + ((bits >> SHIFT) & MASK) as i64 - BIAS;
    if exp < -1075 {
        return 0f64.copysign(frac);
    }
    if exp > 1023 {
        return if frac < 0.0 {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        };
    }
    let (exp, m) = if exp < -1022 {
        (exp + 53, 1.0 / (1u64 << 53) as f64)
    } else {
        (exp, 1.0)
    };
    bits &= !(MASK << SHIFT);
    bits |= ((exp + BIAS) as u64) << SHIFT;
    m * f64::from_bits(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_pow_agrees_with_exact_powers_and_its_special_cases() {
        assert_eq!(go_pow(0.5, 3), 0.125);
        assert_eq!(go_pow(3.0, 4), 81.0);
        assert_eq!(go_pow(-2.0, 3), -8.0);
        assert_eq!(go_pow(0.0, 5), 0.0);
        assert_eq!(go_pow(1.0, 1_000_000), 1.0);
        assert_eq!(go_pow(0.3, 100_000), 0.0);
        assert_eq!(go_pow(f64::NEG_INFINITY, 3), f64::NEG_INFINITY);
        assert!(go_pow(f64::NAN, 2).is_nan());
        // Within a few bits of the libm power, and a subnormal result is not zero.
        for (x, y) in [(0.7, 37u64), (0.9999, 5000), (1.5, 200)] {
            let (a, b) = (go_pow(x, y), x.powi(y as i32));
            assert!((a - b).abs() <= b.abs() * 1e-13, "{x}^{y}: {a} vs {b}");
        }
        assert!(go_pow(0.5, 1070) > 0.0);
        // Go's `math.Pow` of these (its bits), each one bit away from the libm power: of
        // 18,000 such powers, 14,465 differ from `powf`.
        for (x, y, go) in [
            (0.33849999999999997, 51, 1.01740138400108e-24),
            (0.37734999999999996, 37, 2.1854511836586952e-16),
            (0.4162, 23, 1.7536694854180024e-9),
            (0.45504999999999995, 9, 0.0008366273700904638),
            (0.49355, 58, 1.6338307371470455e-18),
        ] {
            assert_eq!(go_pow(x, y).to_bits(), f64::to_bits(go), "{x}^{y}");
            assert_ne!(x.powf(y as f64).to_bits(), f64::to_bits(go), "{x}^{y}");
        }
    }

    #[test]
    fn frexp_and_ldexp_invert_each_other_down_to_subnormals() {
        for x in [1.0, 0.75, -3.5, 1e-310, 6.0e23] {
            let (f, e) = frexp(x);
            assert!((0.5..1.0).contains(&f.abs()), "{x}: {f}");
            assert_eq!(ldexp(f, e), x);
        }
    }
}
