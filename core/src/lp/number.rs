//! Field value scalars of line protocol: numbers and booleans.
//!
//! The grammar is validated by hand before any conversion because Rust's
//! `f64::from_str` is more lenient than InfluxDB (it accepts `inf`, `NaN`,
//! `+1`), and a hand-rolled fast path for short decimals avoids the general
//! parser for the typical Telegraf value.

/// A parsed numeric field value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Number {
    Float(f64),
    Integer(i64),
    UInteger(u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NumberError {
    /// Not a number in line-protocol syntax.
    Invalid,
    /// Integer beyond `i64`/`u64`.
    OutOfRange,
    /// A float that overflows to infinity.
    NonFinite,
}

/// Parses `123`, `-1.5e3`, `.5`, `123i`, `123u` (InfluxDB 1.8 syntax); the
/// whole of `tok` must be the number.
#[cfg(test)]
pub(crate) fn parse_number(tok: &[u8]) -> Result<Number, NumberError> {
    match scan_number(tok, 0)? {
        (n, end) if end == tok.len() => Ok(n),
        _ => Err(NumberError::Invalid),
    }
}

/// Parses a number starting at `buf[start]` in one pass and returns it with
/// the position after it. The number must be followed by the end of `buf`
/// or a value terminator (`,`, space, tab, `\r`, `\n`).
#[inline(always)]
pub(crate) fn scan_number(buf: &[u8], start: usize) -> Result<(Number, usize), NumberError> {
    let mut i = start;
    let neg = buf.get(i) == Some(&b'-');
    if neg {
        i += 1;
    }
    let mut mantissa: u64 = 0;
    let mut digits = 0usize;
    while let Some(&d) = buf.get(i).filter(|d| d.is_ascii_digit()) {
        mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
        digits += 1;
        i += 1;
    }
    let int_end = i;
    match buf.get(i) {
        Some(b'i') if digits > 0 => {
            let v = parse_int(&buf[start..int_end])?;
            return terminated(buf, i + 1, Number::Integer(v));
        }
        Some(b'u') if digits > 0 && !neg => {
            let v = parse_uint(&buf[start..int_end])?;
            return terminated(buf, i + 1, Number::UInteger(v));
        }
        _ => {}
    }
    let mut frac_digits = 0usize;
    if buf.get(i) == Some(&b'.') {
        i += 1;
        while let Some(&d) = buf.get(i).filter(|d| d.is_ascii_digit()) {
            mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
            digits += 1;
            frac_digits += 1;
            i += 1;
        }
    }
    if digits == 0 {
        return Err(NumberError::Invalid);
    }
    let mut has_exp = false;
    if matches!(buf.get(i), Some(b'e' | b'E')) {
        has_exp = true;
        i += 1;
        if matches!(buf.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp_start = i;
        while buf.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == exp_start {
            return Err(NumberError::Invalid);
        }
    }
    // Clinger's fast path: with at most 15 significant digits the mantissa
    // and the power of ten are exact doubles, so one IEEE division is
    // correctly rounded, exactly like the general algorithm.
    if !has_exp && digits <= 15 {
        if let Some(p) = POW10.get(frac_digits) {
            // `mantissa < 10^15` fits an i64, whose conversion is a single
            // instruction (u64 -> f64 is not, on x86-64 without AVX-512).
            let v = mantissa as i64 as f64 / p;
            return terminated(buf, i, Number::Float(if neg { -v } else { v }));
        }
    }
    let s = std::str::from_utf8(&buf[start..i]).map_err(|_| NumberError::Invalid)?;
    let v: f64 = s.parse().map_err(|_| NumberError::Invalid)?;
    if !v.is_finite() {
        return Err(NumberError::NonFinite);
    }
    terminated(buf, i, Number::Float(v))
}

/// `n` if `buf[end]` ends the value.
#[inline]
fn terminated(buf: &[u8], end: usize, n: Number) -> Result<(Number, usize), NumberError> {
    match buf.get(end) {
        None | Some(b',' | b' ' | b'\t' | b'\r' | b'\n') => Ok((n, end)),
        Some(_) => Err(NumberError::Invalid),
    }
}

/// Parses line-protocol booleans: t/T/true/True/TRUE and the f forms.
pub(crate) fn parse_bool(tok: &[u8]) -> Option<bool> {
    match tok {
        b"t" | b"T" | b"true" | b"True" | b"TRUE" => Some(true),
        b"f" | b"F" | b"false" | b"False" | b"FALSE" => Some(false),
        _ => None,
    }
}

/// `-?[0-9]+` into an `i64` (timestamps and `i` integers).
pub(crate) fn parse_int(tok: &[u8]) -> Result<i64, NumberError> {
    let (neg, digits) = match tok.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, tok),
    };
    let magnitude = parse_uint(digits)?;
    if neg {
        // i64::MIN's magnitude is one more than i64::MAX.
        0i64.checked_sub_unsigned(magnitude)
            .ok_or(NumberError::OutOfRange)
    } else {
        i64::try_from(magnitude).map_err(|_| NumberError::OutOfRange)
    }
}

/// Parses an integer timestamp starting at `buf[start]`, eight digits at a
/// time, returning it and the position after it. It must be followed by
/// the end of `buf`, a blank or a newline.
pub(crate) fn scan_timestamp(buf: &[u8], start: usize) -> Result<(i64, usize), NumberError> {
    let neg = buf.get(start) == Some(&b'-');
    let first = start + usize::from(neg);
    let mut i = first;
    let mut acc: u64 = 0;
    // Too many digits is only "out of range" once the token has proved to be a number: a
    // stray byte after them makes it a bad timestamp, as it would with fewer digits.
    let mut overflow = false;
    while let Some(chunk) = buf.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let v = u64::from_le_bytes(word);
        if !all_digits8(v) {
            break;
        }
        match acc
            .checked_mul(100_000_000)
            .and_then(|a| a.checked_add(parse8(v)))
        {
            Some(a) => acc = a,
            None => overflow = true,
        }
        i += 8;
    }
    while let Some(&d) = buf.get(i).filter(|d| d.is_ascii_digit()) {
        match acc
            .checked_mul(10)
            .and_then(|a| a.checked_add(u64::from(d - b'0')))
        {
            Some(a) => acc = a,
            None => overflow = true,
        }
        i += 1;
    }
    if i == first || !matches!(buf.get(i), None | Some(b' ' | b'\t' | b'\r' | b'\n')) {
        return Err(NumberError::Invalid);
    }
    if overflow {
        return Err(NumberError::OutOfRange);
    }
    let v = if neg {
        0i64.checked_sub_unsigned(acc)
    } else {
        i64::try_from(acc).ok()
    };
    Ok((v.ok_or(NumberError::OutOfRange)?, i))
}

/// `[0-9]+` into a `u64`, eight digits at a time: a nanosecond timestamp
/// has 19 digits and is parsed on every line.
fn parse_uint(digits: &[u8]) -> Result<u64, NumberError> {
    if digits.is_empty() {
        return Err(NumberError::Invalid);
    }
    let mut acc: u64 = 0;
    let mut chunks = digits.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let v = u64::from_le_bytes(word);
        if !all_digits8(v) {
            return Err(NumberError::Invalid);
        }
        acc = acc
            .checked_mul(100_000_000)
            .and_then(|a| a.checked_add(parse8(v)))
            .ok_or(NumberError::OutOfRange)?;
    }
    for &d in chunks.remainder() {
        if !d.is_ascii_digit() {
            return Err(NumberError::Invalid);
        }
        acc = acc
            .checked_mul(10)
            .and_then(|a| a.checked_add(u64::from(d - b'0')))
            .ok_or(NumberError::OutOfRange)?;
    }
    Ok(acc)
}

/// Whether all eight bytes of `v` are ASCII digits (SWAR check).
#[inline]
fn all_digits8(v: u64) -> bool {
    const HI: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    ((v & HI) | ((v.wrapping_add(0x0606_0606_0606_0606) & HI) >> 4)) == 0x3333_3333_3333_3333
}

/// Value of eight ASCII digits loaded little-endian (first digit in the
/// lowest byte), combining pairs, then quads, then halves.
#[inline]
fn parse8(v: u64) -> u64 {
    let v = v.wrapping_sub(0x3030_3030_3030_3030);
    let v = (v.wrapping_mul(10).wrapping_add(v >> 8)) & 0x00FF_00FF_00FF_00FF;
    let v = (v.wrapping_mul(100).wrapping_add(v >> 16)) & 0x0000_FFFF_0000_FFFF;
    (v.wrapping_mul(10_000).wrapping_add(v >> 32)) & 0xFFFF_FFFF
}

/// Powers of ten exactly representable as `f64`.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats() {
        let ok = [
            ("0", 0.0),
            ("1", 1.0),
            ("-1.5", -1.5),
            ("99.1", 99.1),
            (".5", 0.5),
            ("5.", 5.0),
            ("-.25", -0.25),
            ("1e3", 1000.0),
            ("1E-3", 0.001),
            ("-2.5e+2", -250.0),
            ("0.000000000000001", 1e-15),
            ("123456789012345678901234567890", 1.2345678901234568e29),
            ("0.1234567890123456789", 0.12345678901234568),
            ("1.7976931348623157e308", f64::MAX),
        ];
        for (s, want) in ok {
            assert_eq!(parse_number(s.as_bytes()), Ok(Number::Float(want)), "{s}");
            assert_eq!(want, s.parse::<f64>().unwrap(), "{s}");
        }
        let Ok(Number::Float(neg_zero)) = parse_number(b"-0.0") else {
            panic!()
        };
        assert!(neg_zero == 0.0 && neg_zero.is_sign_negative());
        for s in [
            "", "-", ".", "-.", "1.2.3", "1e", "1e+", "+1", "inf", "-inf", "NaN", "nan", "1_0",
            "0x10", "1.5i", "1e5i", "--1", "1 ", "e5",
        ] {
            assert_eq!(
                parse_number(s.as_bytes()),
                Err(NumberError::Invalid),
                "{s:?}"
            );
        }
        assert_eq!(parse_number(b"1e999"), Err(NumberError::NonFinite));
        assert_eq!(parse_number(b"-1e999"), Err(NumberError::NonFinite));
    }

    #[test]
    fn fast_path_matches_std() {
        // Exhaustive-ish check of the Clinger path against std.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let digits = (x % 15 + 1) as usize;
            let mant = x % 10u64.pow(digits as u32);
            let mut s = format!("{mant:0digits$}");
            let dot = ((x >> 32) % (digits as u64 + 1)) as usize;
            s.insert(dot, '.');
            if s == "." {
                continue;
            }
            let Ok(Number::Float(got)) = parse_number(s.as_bytes()) else {
                panic!("{s}")
            };
            assert_eq!(got.to_bits(), s.parse::<f64>().unwrap().to_bits(), "{s}");
        }
    }

    #[test]
    fn integers() {
        assert_eq!(parse_number(b"123i"), Ok(Number::Integer(123)));
        assert_eq!(parse_number(b"-0i"), Ok(Number::Integer(0)));
        assert_eq!(
            parse_number(b"-9223372036854775808i"),
            Ok(Number::Integer(i64::MIN))
        );
        assert_eq!(
            parse_number(b"9223372036854775807i"),
            Ok(Number::Integer(i64::MAX))
        );
        assert_eq!(
            parse_number(b"9223372036854775808i"),
            Err(NumberError::OutOfRange)
        );
        assert_eq!(
            parse_number(b"-9223372036854775809i"),
            Err(NumberError::OutOfRange)
        );
        for s in ["i", "-i", "1.0i", "+1i", "1ei", "1ii"] {
            assert_eq!(parse_number(s.as_bytes()), Err(NumberError::Invalid), "{s}");
        }
    }

    #[test]
    fn unsigned() {
        assert_eq!(parse_number(b"0u"), Ok(Number::UInteger(0)));
        assert_eq!(
            parse_number(b"18446744073709551615u"),
            Ok(Number::UInteger(u64::MAX))
        );
        assert_eq!(
            parse_number(b"18446744073709551616u"),
            Err(NumberError::OutOfRange)
        );
        for s in ["u", "-1u", "1.5u", "+1u"] {
            assert_eq!(parse_number(s.as_bytes()), Err(NumberError::Invalid), "{s}");
        }
    }

    #[test]
    fn swar_digits() {
        assert_eq!(
            parse_int(b"1700000000000000000"),
            Ok(1_700_000_000_000_000_000)
        );
        assert_eq!(parse_int(b"12345678"), Ok(12_345_678));
        assert_eq!(parse_int(b"00000000000000000001"), Ok(1));
        assert_eq!(parse_int(b"1234567a"), Err(NumberError::Invalid));
        assert_eq!(parse_int(b"1234/678"), Err(NumberError::Invalid));
        assert_eq!(parse_int(b"1234:678"), Err(NumberError::Invalid));
        assert_eq!(parse_int(b"\xff2345678"), Err(NumberError::Invalid));
        assert_eq!(parse_int(b""), Err(NumberError::Invalid));
        assert_eq!(parse_int(b"-"), Err(NumberError::Invalid));
        let mut x: u64 = 7;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = (x >> 1) as i64 * if x & 1 == 0 { 1 } else { -1 };
            assert_eq!(parse_int(v.to_string().as_bytes()), Ok(v));
        }
    }

    #[test]
    fn an_overlong_timestamp_with_a_stray_byte_is_invalid_not_out_of_range() {
        assert_eq!(
            scan_timestamp(b"99999999999999999999x", 0),
            Err(NumberError::Invalid)
        );
        assert_eq!(
            scan_timestamp(b"99999999999999999999 ", 0),
            Err(NumberError::OutOfRange)
        );
    }

    #[test]
    fn scan_timestamp_matches_parse_int() {
        for s in [
            "0",
            "-0",
            "1",
            "-1",
            "12345678",
            "123456789",
            "1700000000000000000",
            "-9223372036854775808",
            "9223372036854775807",
            "00000000000000000000001",
        ] {
            assert_eq!(
                scan_timestamp(s.as_bytes(), 0).map(|r| r.0),
                parse_int(s.as_bytes()),
                "{s}"
            );
            let line = format!("x {s} \n");
            assert_eq!(
                scan_timestamp(line.as_bytes(), 2),
                parse_int(s.as_bytes()).map(|v| (v, 2 + s.len()))
            );
        }
        for s in [
            "9223372036854775808",
            "-9223372036854775809",
            "99999999999999999999",
        ] {
            assert_eq!(
                scan_timestamp(s.as_bytes(), 0),
                Err(NumberError::OutOfRange),
                "{s}"
            );
        }
        for s in [
            "",
            "-",
            "+1",
            "1a",
            "12345678a",
            "1.5",
            "1e3",
            "--1",
            "123456789012345678x",
        ] {
            assert_eq!(
                scan_timestamp(s.as_bytes(), 0),
                Err(NumberError::Invalid),
                "{s}"
            );
        }
    }

    #[test]
    fn scan_number_stops_at_terminators() {
        assert_eq!(scan_number(b"x=1.5,y", 2), Ok((Number::Float(1.5), 5)));
        assert_eq!(scan_number(b"12i 5", 0), Ok((Number::Integer(12), 3)));
        assert_eq!(scan_number(b"12u\n", 0), Ok((Number::UInteger(12), 3)));
        assert_eq!(scan_number(b"12x", 0), Err(NumberError::Invalid));
        assert_eq!(scan_number(b"1.5i", 0), Err(NumberError::Invalid));
    }

    #[test]
    fn booleans() {
        for s in ["t", "T", "true", "True", "TRUE"] {
            assert_eq!(parse_bool(s.as_bytes()), Some(true));
        }
        for s in ["f", "F", "false", "False", "FALSE"] {
            assert_eq!(parse_bool(s.as_bytes()), Some(false));
        }
        for s in ["tRUE", "yes", "1", "truee", "fa"] {
            assert_eq!(parse_bool(s.as_bytes()), None);
        }
    }
}
