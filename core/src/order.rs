//! The order rows are stored in: by series, then time (the tables' `ORDER BY`).
//!
//! chDB sorts every inserted block by the table's sort key unless it finds the block already
//! sorted, and its general multi-column sort was about half of its insert cost (a 1 M-row
//! insert: about 215 ns per row unsorted, 105 sorted). The rows of a flush have few distinct
//! series and arrive in time order within each, so a counting sort by series rank is linear
//! and usually leaves nothing to do within a series.

use crate::fasthash::IdMap;

/// The permutation that orders rows by `(series, time)`, stably (rows with equal keys keep their
/// order), or `None` when they already are. `series` and `time` are the rows' columns and have
/// the same length, at most `u32::MAX`.
pub fn sort_order(series: &[u64], time: &[i64]) -> Option<Vec<u32>> {
    debug_assert_eq!(series.len(), time.len());
    let n = series.len().min(time.len());
    if is_sorted(&series[..n], &time[..n]) {
        return None;
    }
    // Dense slots in order of first appearance.
    let mut slot_of: IdMap<u32> = IdMap::default();
    let mut distinct: Vec<u64> = Vec::new();
    let slots: Vec<u32> = series[..n]
        .iter()
        .map(|&s| {
            *slot_of.entry(s).or_insert_with(|| {
                distinct.push(s);
                (distinct.len() - 1) as u32
            })
        })
        .collect();
    // Slot -> rank among the distinct series.
    let mut by_id: Vec<u32> = (0..distinct.len() as u32).collect();
    by_id.sort_unstable_by_key(|&i| distinct[i as usize]);
    let mut rank = vec![0u32; distinct.len()];
    for (r, &slot) in by_id.iter().enumerate() {
        rank[slot as usize] = r as u32;
    }
    // Counting sort by rank: where each series' rows start, then scatter in input order.
    let mut start = vec![0u32; distinct.len() + 1];
    for &slot in &slots {
        start[rank[slot as usize] as usize + 1] += 1;
    }
    for i in 1..start.len() {
        start[i] += start[i - 1];
    }
    let mut next = start.clone();
    let mut perm = vec![0u32; n];
    for (row, &slot) in slots.iter().enumerate() {
        let r = rank[slot as usize] as usize;
        perm[next[r] as usize] = row as u32;
        next[r] += 1;
    }
    // Within a series, rows are usually in time order already.
    for w in start.windows(2) {
        let group = &mut perm[w[0] as usize..w[1] as usize];
        if !group
            .windows(2)
            .all(|p| time[p[0] as usize] <= time[p[1] as usize])
        {
            group.sort_by_key(|&row| time[row as usize]);
        }
    }
    Some(perm)
}

fn is_sorted(series: &[u64], time: &[i64]) -> bool {
    series
        .windows(2)
        .zip(time.windows(2))
        .all(|(s, t)| (s[0], t[0]) <= (s[1], t[1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The permutation's result checked against a plain stable sort of (series, time, row).
    fn check(series: &[u64], time: &[i64]) {
        let mut expected: Vec<u32> = (0..series.len() as u32).collect();
        expected.sort_by_key(|&r| (series[r as usize], time[r as usize]));
        match sort_order(series, time) {
            None => assert_eq!(expected, (0..series.len() as u32).collect::<Vec<_>>()),
            Some(perm) => assert_eq!(perm, expected),
        }
    }

    #[test]
    fn sorted_rows_need_no_permutation() {
        assert_eq!(sort_order(&[], &[]), None);
        assert_eq!(sort_order(&[5], &[1]), None);
        assert_eq!(sort_order(&[1, 1, 2, 3], &[1, 2, 0, 0]), None);
        // Equal keys count as sorted.
        assert_eq!(sort_order(&[1, 1], &[7, 7]), None);
    }

    #[test]
    fn interleaved_series_are_grouped_in_id_order_and_time_order() {
        let series = [9, 3, 9, 3, u64::MAX, 0];
        let time = [1, 1, 2, 2, 0, 5];
        assert_eq!(sort_order(&series, &time), Some(vec![5, 1, 3, 0, 2, 4]));
    }

    #[test]
    fn out_of_order_times_within_a_series_are_sorted_stably() {
        // Series 4 arrives 30, 10, 20, 10: the two 10s keep their input order (rows 1, 3).
        let series = [4, 4, 2, 4, 4];
        let time = [30, 10, 5, 20, 10];
        assert_eq!(sort_order(&series, &time), Some(vec![2, 1, 4, 3, 0]));
    }

    #[test]
    fn matches_a_plain_sort_on_generated_rows() {
        // A deterministic mix: many series, repeated timestamps, some going backwards.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for (rows, series_count) in [(10, 3), (1000, 1), (1000, 37), (5000, 5000)] {
            let series: Vec<u64> = (0..rows).map(|_| next() % series_count).collect();
            let time: Vec<i64> = (0..rows).map(|_| (next() % 50) as i64 - 25).collect();
            check(&series, &time);
        }
    }
}
