//! What a WAL entry holds: a measurement batch (encoded by `sluice_core::codec`) or rows for
//! the series dimension table. The first byte says which.

use sluice_core::codec;
use sluice_core::MeasurementBatch;

const KIND_MEASUREMENT: u8 = 0;
const KIND_SERIES: u8 = 1;

/// One row of the series dimension table.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesRow {
    pub db: String,
    pub measurement: String,
    pub series_id: u64,
    pub tags: Vec<(String, String)>,
    pub first_seen_ns: i64,
}

#[derive(Debug)]
pub enum Payload {
    Measurement(MeasurementBatch),
    Series(Vec<SeriesRow>),
}

#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    #[error("empty WAL payload")]
    Empty,
    #[error("unknown WAL payload kind {0}")]
    Kind(u8),
    #[error("measurement batch: {0}")]
    Codec(#[from] codec::CodecError),
    #[error("series rows truncated or malformed at byte {0}")]
    Series(usize),
}

pub fn encode_measurement(batch: &MeasurementBatch) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + batch.len() * 48);
    out.push(KIND_MEASUREMENT);
    codec::encode(batch, &mut out);
    out
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

pub fn encode_series(rows: &[SeriesRow]) -> Vec<u8> {
    let mut out = vec![KIND_SERIES];
    out.extend_from_slice(&(rows.len() as u32).to_le_bytes());
    for r in rows {
        out.extend_from_slice(&r.series_id.to_le_bytes());
        out.extend_from_slice(&r.first_seen_ns.to_le_bytes());
        put_str(&mut out, &r.db);
        put_str(&mut out, &r.measurement);
        out.extend_from_slice(&(r.tags.len() as u32).to_le_bytes());
        for (k, v) in &r.tags {
            put_str(&mut out, k);
            put_str(&mut out, v);
        }
    }
    out
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], PayloadError> {
        let end = self
            .pos
            .checked_add(n)
            .ok_or(PayloadError::Series(self.pos))?;
        let s = self
            .buf
            .get(self.pos..end)
            .ok_or(PayloadError::Series(self.pos))?;
        self.pos = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, PayloadError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, PayloadError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    fn string(&mut self) -> Result<String, PayloadError> {
        let n = self.u32()? as usize;
        let at = self.pos;
        let b = self.take(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| PayloadError::Series(at))
    }
}

pub fn decode(bytes: &[u8]) -> Result<Payload, PayloadError> {
    let (&kind, rest) = bytes.split_first().ok_or(PayloadError::Empty)?;
    match kind {
        KIND_MEASUREMENT => Ok(Payload::Measurement(codec::decode(rest)?)),
        KIND_SERIES => {
            let mut r = Reader { buf: rest, pos: 0 };
            let n = r.u32()? as usize;
            let mut rows = Vec::with_capacity(n.min(rest.len() / 24 + 1));
            for _ in 0..n {
                let series_id = r.u64()?;
                let first_seen_ns = r.u64()? as i64;
                let db = r.string()?;
                let measurement = r.string()?;
                let ntags = r.u32()? as usize;
                let mut tags = Vec::with_capacity(ntags.min(64));
                for _ in 0..ntags {
                    let k = r.string()?;
                    let v = r.string()?;
                    tags.push((k, v));
                }
                rows.push(SeriesRow {
                    db,
                    measurement,
                    series_id,
                    tags,
                    first_seen_ns,
                });
            }
            Ok(Payload::Series(rows))
        }
        k => Err(PayloadError::Kind(k)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_rows_round_trip_and_truncation_is_an_error() {
        let rows = vec![
            SeriesRow {
                db: "db".into(),
                measurement: "cpu".into(),
                series_id: 42,
                tags: vec![("host".into(), "a".into()), ("ü".into(), "x y".into())],
                first_seen_ns: -5,
            },
            SeriesRow {
                db: "db".into(),
                measurement: "mem".into(),
                series_id: 7,
                tags: vec![],
                first_seen_ns: 1,
            },
        ];
        let enc = encode_series(&rows);
        match decode(&enc).unwrap() {
            Payload::Series(r) => assert_eq!(r, rows),
            _ => panic!("wrong kind"),
        }
        for cut in 0..enc.len() {
            assert!(
                decode(&enc[..cut]).is_err(),
                "prefix of {cut} bytes decoded"
            );
        }
        assert!(matches!(decode(&[9]), Err(PayloadError::Kind(9))));
    }
}
