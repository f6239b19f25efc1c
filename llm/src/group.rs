//! Request groups: which requests one caller sent together.
//!
//! A caller that sends several requests at once (a stage asking the model for
//! every instance's next turn) runs them inside one group; a caller whose
//! requests depend on each other (a chain: each call waits for the one before)
//! sends each call in a group of its own. A backend that queues requests may
//! use the group to share its slots between callers instead of serving them
//! first come, first served: the embedded backend admits next a request of the
//! group with the fewest requests in flight (see its module docs), so a chain's
//! call waits for a free slot, not behind every request of a wide batch that
//! arrived before it.
//!
//! The group travels as a tokio task-local value, never as part of the request:
//! it changes the order requests are served in, not what they are, so it is in
//! no cache key. Requests sent outside any group each count as a group of
//! their own.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};

tokio::task_local! {
    static GROUP: u64;
}

static NEXT: AtomicU64 = AtomicU64::new(1);

/// A group id no one else has (process-wide).
pub fn new_group() -> u64 {
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Runs `f` with its requests in `group`.
pub async fn in_group<F: Future>(group: u64, f: F) -> F::Output {
    GROUP.scope(group, f).await
}

/// The group of the requests the current task sends; `None` outside
/// [`in_group`] (and outside a tokio task).
pub fn current() -> Option<u64> {
    GROUP.try_with(|g| *g).ok()
}

/// The current group, or a new one when the task runs in none.
pub fn current_or_new() -> u64 {
    current().unwrap_or_else(new_group)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_group_is_seen_inside_its_scope_only() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        assert_eq!(current(), None);
        let (a, b) = (new_group(), new_group());
        assert_ne!(a, b);
        let seen = rt.block_on(in_group(a, async { current() }));
        assert_eq!(seen, Some(a));
        let nested = rt.block_on(in_group(a, in_group(b, async { current() })));
        assert_eq!(nested, Some(b));
        assert_eq!(rt.block_on(async { current() }), None);
        let fresh = (current_or_new(), current_or_new());
        assert_ne!(
            fresh.0, fresh.1,
            "requests outside a group are groups of their own"
        );
    }
}
