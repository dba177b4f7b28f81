//! Minimal zero-copy msgpack reader over a byte slice.
//!
//! rmp's readers copy strings out or work on `io::Read`; we only need to
//! walk a borrowed buffer, and every step must report (never panic on)
//! truncated or hostile input.

use rmp::Marker;

/// One msgpack item. Containers report their length; their contents are
/// the following items.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Item<'a> {
    Nil,
    Bool(bool),
    /// Any integer that fits `i64`, whatever marker encoded it.
    Int(i64),
    /// A non-negative integer above `i64::MAX`.
    BigUInt(u64),
    Float(f64),
    Str(&'a [u8]),
    Bin,
    Ext,
    Array(u32),
    Map(u32),
}

impl Item<'_> {
    /// msgpack type name for error messages.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Item::Nil => "nil",
            Item::Bool(_) => "a boolean",
            Item::Int(_) | Item::BigUInt(_) => "an integer",
            Item::Float(_) => "a float",
            Item::Str(_) => "a string",
            Item::Bin => "binary",
            Item::Ext => "an extension",
            Item::Array(_) => "an array",
            Item::Map(_) => "a map",
        }
    }
}

/// Why the bytes are not msgpack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Malformed {
    Truncated,
    ReservedMarker,
}

impl Malformed {
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Malformed::Truncated => "truncated input",
            Malformed::ReservedMarker => "reserved marker byte 0xc1",
        }
    }
}

#[derive(Clone)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        let end = self.pos.checked_add(n).ok_or(Malformed::Truncated)?;
        let s = self.buf.get(self.pos..end).ok_or(Malformed::Truncated)?;
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Malformed> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, Malformed> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, Malformed> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, Malformed> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, Malformed> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    /// Reads the next item (for containers: only the header).
    pub(crate) fn next(&mut self) -> Result<Item<'a>, Malformed> {
        let marker = Marker::from_u8(self.u8()?);
        Ok(match marker {
            Marker::FixPos(v) => Item::Int(i64::from(v)),
            Marker::FixNeg(v) => Item::Int(i64::from(v)),
            Marker::Null => Item::Nil,
            Marker::True => Item::Bool(true),
            Marker::False => Item::Bool(false),
            Marker::U8 => Item::Int(i64::from(self.u8()?)),
            Marker::U16 => Item::Int(i64::from(self.u16()?)),
            Marker::U32 => Item::Int(i64::from(self.u32()?)),
            Marker::U64 => {
                let v = self.u64()?;
                i64::try_from(v).map_or(Item::BigUInt(v), Item::Int)
            }
            Marker::I8 => Item::Int(i64::from(i8::from_be_bytes(self.array()?))),
            Marker::I16 => Item::Int(i64::from(i16::from_be_bytes(self.array()?))),
            Marker::I32 => Item::Int(i64::from(i32::from_be_bytes(self.array()?))),
            Marker::I64 => Item::Int(i64::from_be_bytes(self.array()?)),
            Marker::F32 => Item::Float(f64::from(f32::from_be_bytes(self.array()?))),
            Marker::F64 => Item::Float(f64::from_be_bytes(self.array()?)),
            Marker::FixStr(n) => Item::Str(self.take(usize::from(n))?),
            Marker::Str8 => {
                let n = self.u8()?;
                Item::Str(self.take(usize::from(n))?)
            }
            Marker::Str16 => {
                let n = self.u16()?;
                Item::Str(self.take(usize::from(n))?)
            }
            Marker::Str32 => {
                let n = self.u32()?;
                Item::Str(self.take(n as usize)?)
            }
            Marker::Bin8 => {
                let n = self.u8()?;
                self.take(usize::from(n))?;
                Item::Bin
            }
            Marker::Bin16 => {
                let n = self.u16()?;
                self.take(usize::from(n))?;
                Item::Bin
            }
            Marker::Bin32 => {
                let n = self.u32()?;
                self.take(n as usize)?;
                Item::Bin
            }
            Marker::FixExt1 => self.ext(1)?,
            Marker::FixExt2 => self.ext(2)?,
            Marker::FixExt4 => self.ext(4)?,
            Marker::FixExt8 => self.ext(8)?,
            Marker::FixExt16 => self.ext(16)?,
            Marker::Ext8 => {
                let n = self.u8()?;
                self.ext(usize::from(n))?
            }
            Marker::Ext16 => {
                let n = self.u16()?;
                self.ext(usize::from(n))?
            }
            Marker::Ext32 => {
                let n = self.u32()?;
                self.ext(n as usize)?
            }
            Marker::FixArray(n) => Item::Array(u32::from(n)),
            Marker::Array16 => Item::Array(u32::from(self.u16()?)),
            Marker::Array32 => Item::Array(self.u32()?),
            Marker::FixMap(n) => Item::Map(u32::from(n)),
            Marker::Map16 => Item::Map(u32::from(self.u16()?)),
            Marker::Map32 => Item::Map(self.u32()?),
            Marker::Reserved => return Err(Malformed::ReservedMarker),
        })
    }

    /// Extension: a type byte then `len` data bytes.
    fn ext(&mut self, len: usize) -> Result<Item<'a>, Malformed> {
        self.take(len.checked_add(1).ok_or(Malformed::Truncated)?)?;
        Ok(Item::Ext)
    }

    /// Skips one complete value, iteratively so nesting depth cannot
    /// overflow the stack.
    pub(crate) fn skip_value(&mut self) -> Result<(), Malformed> {
        let mut pending: u64 = 1;
        while pending > 0 {
            pending -= 1;
            match self.next()? {
                Item::Array(n) => pending += u64::from(n),
                Item::Map(n) => pending += 2 * u64::from(n),
                _ => {}
            }
            // Every item takes at least one byte: fail fast on lengths the
            // input cannot possibly hold.
            if pending > self.remaining() as u64 {
                return Err(Malformed::Truncated);
            }
        }
        Ok(())
    }

    /// Skips one value after its header `item` has already been read.
    pub(crate) fn skip_rest(&mut self, item: Item<'a>) -> Result<(), Malformed> {
        let n = match item {
            Item::Array(n) => u64::from(n),
            Item::Map(n) => 2 * u64::from(n),
            _ => 0,
        };
        for _ in 0..n {
            self.skip_value()?;
        }
        Ok(())
    }

    /// Upper bound on how many items can follow (for preallocation).
    pub(crate) fn max_items(&self) -> usize {
        self.remaining()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_scalars() {
        let mut buf = Vec::new();
        rmp::encode::write_nil(&mut buf).unwrap();
        rmp::encode::write_bool(&mut buf, true).unwrap();
        rmp::encode::write_sint(&mut buf, -5).unwrap();
        rmp::encode::write_i64(&mut buf, 7).unwrap();
        rmp::encode::write_u64(&mut buf, u64::MAX).unwrap();
        rmp::encode::write_u64(&mut buf, 3).unwrap();
        rmp::encode::write_f32(&mut buf, 1.5).unwrap();
        rmp::encode::write_f64(&mut buf, -2.25).unwrap();
        rmp::encode::write_str(&mut buf, "hé").unwrap();
        rmp::encode::write_bin(&mut buf, b"xy").unwrap();
        rmp::encode::write_ext_meta(&mut buf, 3, 5).unwrap();
        buf.extend_from_slice(b"abc");
        let mut r = Reader::new(&buf);
        let want = [
            Item::Nil,
            Item::Bool(true),
            Item::Int(-5),
            Item::Int(7),
            Item::BigUInt(u64::MAX),
            Item::Int(3),
            Item::Float(1.5),
            Item::Float(-2.25),
            Item::Str("hé".as_bytes()),
            Item::Bin,
            Item::Ext,
        ];
        for w in want {
            assert_eq!(r.next(), Ok(w));
        }
        assert!(r.at_end());
    }

    #[test]
    fn skips_nested_values_and_rejects_truncation() {
        let mut buf = Vec::new();
        rmp::encode::write_map_len(&mut buf, 1).unwrap();
        rmp::encode::write_str(&mut buf, "k").unwrap();
        rmp::encode::write_array_len(&mut buf, 2).unwrap();
        rmp::encode::write_array_len(&mut buf, 0).unwrap();
        rmp::encode::write_str(&mut buf, "v").unwrap();
        let mut r = Reader::new(&buf);
        assert_eq!(r.skip_value(), Ok(()));
        assert!(r.at_end());
        for cut in 0..buf.len() {
            let mut r = Reader::new(&buf[..cut]);
            assert_eq!(r.skip_value(), Err(Malformed::Truncated), "cut {cut}");
        }
        // A huge declared length fails fast instead of looping.
        let mut r = Reader::new(&[0xdd, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(r.skip_value(), Err(Malformed::Truncated));
        let mut r = Reader::new(&[0xc1]);
        assert_eq!(r.skip_value(), Err(Malformed::ReservedMarker));
        // Deep nesting does not recurse.
        let deep = vec![0x91u8; 100_000];
        let mut r = Reader::new(&deep);
        assert_eq!(r.skip_value(), Err(Malformed::Truncated));
    }
}
