//! What a request may hold while it is served: a place among the requests in flight, and the
//! memory of its body (as sent, inflated, and parsed) out of one budget.
//!
//! Both are taken without waiting: a request that does not fit is answered 503 with
//! `Retry-After` at once, so a flood of clients (or a few slow ones holding bodies open) costs
//! bounded memory and never queues work the server cannot do.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Bytes of memory per semaphore permit (the budget is counted in KiB so that it fits the
/// semaphore's permit count).
const UNIT: u64 = 1024;

/// Memory charged for parsing, per byte of (decompressed) body: the columns, series and
/// errors a parser builds. Ordinary bodies take about one byte per byte; the parser's own
/// bounds (values, new series, kept errors) hold an adversarial one to a few.
pub const PARSE_BYTES_PER_BODY_BYTE: u64 = 3;

pub struct Admission {
    requests: Arc<Semaphore>,
    max_requests: u32,
    memory: Arc<Semaphore>,
    memory_units: u32,
}

impl Admission {
    pub fn new(max_requests: u32, memory_bytes: u64) -> Self {
        let memory_units = u32::try_from(memory_bytes / UNIT)
            .unwrap_or(u32::MAX)
            .clamp(1, Semaphore::MAX_PERMITS as u32);
        Self {
            requests: Arc::new(Semaphore::new(max_requests.max(1) as usize)),
            max_requests,
            memory: Arc::new(Semaphore::new(memory_units as usize)),
            memory_units,
        }
    }

    /// A place among the requests in flight, if one is free.
    pub fn enter(&self) -> Option<OwnedSemaphorePermit> {
        self.requests.clone().try_acquire_owned().ok()
    }

    pub fn max_requests(&self) -> u32 {
        self.max_requests
    }

    /// An empty reservation of request memory, grown as the request needs.
    pub fn reserve(&self) -> Reservation {
        Reservation {
            memory: self.memory.clone(),
            total_units: self.memory_units,
            units: 0,
        }
    }

    /// Requests holding a place now (for metrics): a streamed answer holds its place until
    /// its last chunk, a stalled body until its read times out.
    pub fn requests_in_flight(&self) -> u64 {
        (self.max_requests.max(1) as usize).saturating_sub(self.requests.available_permits()) as u64
    }

    /// Memory left in the budget, in bytes (for metrics).
    pub fn memory_available(&self) -> u64 {
        self.memory.available_permits() as u64 * UNIT
    }
}

/// Request memory held until the request is done (given back when dropped). Its permits are
/// taken out of the semaphore (`forget`) and added back by count, so it can also shrink.
pub struct Reservation {
    memory: Arc<Semaphore>,
    total_units: u32,
    units: u32,
}

impl Reservation {
    /// Holds at least `bytes` in all, taking what is missing if the budget has it. A request
    /// larger than the whole budget is charged the whole budget: it then runs alone.
    pub fn grow_to(&mut self, bytes: u64) -> bool {
        let want = u32::try_from(bytes.div_ceil(UNIT))
            .unwrap_or(u32::MAX)
            .min(self.total_units);
        if want <= self.units {
            return true;
        }
        match self.memory.try_acquire_many(want - self.units) {
            Ok(p) => {
                p.forget();
                self.units = want;
                true
            }
            Err(_) => false,
        }
    }

    /// Holds at most `bytes` (at least one unit), giving the rest back.
    pub fn shrink_to(&mut self, bytes: u64) {
        let want = u32::try_from(bytes.div_ceil(UNIT))
            .unwrap_or(u32::MAX)
            .max(1);
        if want < self.units {
            self.memory.add_permits((self.units - want) as usize);
            self.units = want;
        }
    }

    pub fn bytes(&self) -> u64 {
        self.units as u64 * UNIT
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.memory.add_permits(self.units as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_memory_are_bounded_and_given_back() {
        let a = Admission::new(2, 10 * UNIT);
        let one = a.enter().expect("first");
        let two = a.enter().expect("second");
        assert!(a.enter().is_none(), "a third request must not get in");
        drop(one);
        assert!(a.enter().is_some());
        drop(two);

        let mut r = a.reserve();
        assert!(r.grow_to(4 * UNIT));
        assert!(r.grow_to(3 * UNIT), "already held");
        let mut other = a.reserve();
        assert!(other.grow_to(6 * UNIT));
        assert!(!other.grow_to(7 * UNIT), "over the budget");
        assert_eq!(a.memory_available(), 0);
        drop(r);
        assert_eq!(a.memory_available(), 4 * UNIT);
        assert!(other.grow_to(100 * UNIT), "clamped to the whole budget");
        assert_eq!(other.bytes(), 10 * UNIT);
        other.shrink_to(3 * UNIT);
        assert_eq!(other.bytes(), 3 * UNIT);
        assert_eq!(a.memory_available(), 7 * UNIT);
        other.shrink_to(0);
        assert_eq!(other.bytes(), UNIT, "at least one unit is held");
        drop(other);
        assert_eq!(a.memory_available(), 10 * UNIT);
    }
}
