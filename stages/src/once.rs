//! A value built on first use, once, even when concurrent jobs of a drive ask for it
//! at the same moment (the search corpus and its indexes, the chess engine pool, the
//! BFCL executor).

use std::sync::{Mutex, OnceLock, PoisonError};

/// A lazily built value whose build may fail. Unlike a bare [`OnceLock`], callers that
/// arrive while it is being built wait for that build instead of starting their own.
pub struct BuildOnce<T> {
    value: OnceLock<T>,
    building: Mutex<()>,
}

impl<T> Default for BuildOnce<T> {
    fn default() -> Self {
        BuildOnce {
            value: OnceLock::new(),
            building: Mutex::new(()),
        }
    }
}

impl<T> BuildOnce<T> {
    /// The value, built by `build` unless it already was. A failed build leaves it
    /// unset and returns the error, so the next caller tries again.
    pub fn get_or_try_build<E>(&self, build: impl FnOnce() -> Result<T, E>) -> Result<&T, E> {
        if let Some(v) = self.value.get() {
            return Ok(v);
        }
        // A build that panicked left nothing behind: the lock is still usable.
        let _building = self.building.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(v) = self.value.get() {
            return Ok(v);
        }
        let v = build()?;
        Ok(self.value.get_or_init(|| v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[test]
    fn concurrent_callers_build_once_and_share_the_value() {
        let once = BuildOnce::default();
        let builds = AtomicUsize::new(0);
        let got: Vec<usize> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|i| {
                    let (once, builds) = (&once, &builds);
                    s.spawn(move || {
                        *once
                            .get_or_try_build(|| {
                                builds.fetch_add(1, Ordering::SeqCst);
                                // Long enough for the other threads to arrive meanwhile.
                                std::thread::sleep(Duration::from_millis(50));
                                Ok::<_, ()>(i)
                            })
                            .unwrap()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(builds.load(Ordering::SeqCst), 1);
        assert!(got.iter().all(|&v| v == got[0]), "{got:?}");
    }

    #[test]
    fn a_failed_build_is_tried_again() {
        let once = BuildOnce::default();
        assert_eq!(once.get_or_try_build(|| Err("down")), Err("down"));
        assert_eq!(once.get_or_try_build(|| Ok::<_, &str>(7)), Ok(&7));
        assert_eq!(once.get_or_try_build(|| Err("unused")), Ok(&7));
    }
}
