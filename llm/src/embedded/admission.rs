//! The order in which waiting requests get a free slot.

use std::collections::HashMap;

/// Which waiting request the worker admits into a free slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Admission {
    /// A request of the [group](crate::group) with the fewest requests in
    /// slots, the longest waiting of those: callers share the slots, so a
    /// chain of dependent calls is not held up behind a wide batch (the
    /// default).
    #[default]
    FairShare,
    /// First come, first served (to measure the difference).
    Fifo,
}

impl Admission {
    /// `fair` or `fifo` (the names `OTB_LLAMA_ADMISSION` takes).
    pub fn parse(s: &str) -> Option<Admission> {
        match s.trim() {
            "fair" => Some(Admission::FairShare),
            "fifo" => Some(Admission::Fifo),
            _ => None,
        }
    }
}

/// The index in `waiting` (the waiting requests' groups, in arrival order) of
/// the request to admit next under [`Admission::FairShare`]: of the groups
/// with the fewest requests in slots (`in_slots`: their groups), the one
/// whose request has waited longest. `None` when nothing waits.
pub(super) fn next_in_line(
    waiting: impl Iterator<Item = u64>,
    in_slots: impl Iterator<Item = u64>,
) -> Option<usize> {
    let mut running: HashMap<u64, usize> = HashMap::new();
    for g in in_slots {
        *running.entry(g).or_default() += 1;
    }
    // The first of the least served: min_by_key keeps the first of equals.
    waiting
        .enumerate()
        .min_by_key(|(_, g)| running.get(g).copied().unwrap_or(0))
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn next(waiting: &[u64], in_slots: &[u64]) -> Option<usize> {
        next_in_line(waiting.iter().copied(), in_slots.iter().copied())
    }

    #[test]
    fn a_chains_call_goes_before_the_rest_of_a_wide_batch() {
        // Group 1 sent eight requests at once and holds all four slots; group
        // 2's one call arrived after them.
        let waiting = [1, 1, 1, 1, 2];
        assert_eq!(next(&waiting, &[1, 1, 1]), Some(4));
        // With the slots shared as evenly, arrival decides.
        assert_eq!(next(&waiting, &[1, 2]), Some(0));
        assert_eq!(next(&[2, 1], &[]), Some(0));
    }

    #[test]
    fn among_groups_with_as_few_in_slots_the_longest_waiting_goes_first() {
        // Groups 3 and 4 have none in slots; 3's request came first.
        assert_eq!(next(&[1, 3, 4, 3], &[1, 2, 2]), Some(1));
        // Group 5 has one in a slot, group 6 two.
        assert_eq!(next(&[6, 6, 5], &[6, 6, 5]), Some(2));
        assert_eq!(next(&[], &[1]), None);
    }

    #[test]
    fn admission_names() {
        assert_eq!(Admission::parse("fair"), Some(Admission::FairShare));
        assert_eq!(Admission::parse(" fifo\n"), Some(Admission::Fifo));
        assert_eq!(Admission::parse("lifo"), None);
        assert_eq!(Admission::default(), Admission::FairShare);
    }
}
