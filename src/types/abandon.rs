//! Work whose answer nobody waits for any more stops at its next read. The query pool marks the
//! job each thread runs ([`run_marked`]); the index's and the kernel's reads ask [`abandoned`]
//! and fail when it says so, so a request whose client hung up, or a server that is stopping,
//! frees its thread within one read instead of after the whole answer.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A flag that, once raised, abandons every job marked with it.
#[derive(Debug, Clone, Default)]
pub struct Abandon(Arc<AtomicBool>);

impl Abandon {
    /// Abandons every job marked with this flag, running or to come.
    pub fn raise(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether the flag is raised.
    pub fn is_raised(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

thread_local! {
    /// The flags of the job this thread runs: its pool's and its own.
    static MARKS: RefCell<Vec<Abandon>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on this thread marked with `flags`: while it runs, [`abandoned`] says whether any of
/// them is raised. Marks nest; the previous ones are back when `f` returns or panics.
pub fn run_marked<T>(flags: &[&Abandon], f: impl FnOnce() -> T) -> T {
    struct Unmark(usize);
    impl Drop for Unmark {
        fn drop(&mut self) {
            MARKS.with(|m| m.borrow_mut().truncate(self.0));
        }
    }
    let _unmark = MARKS.with(|m| {
        let mut marks = m.borrow_mut();
        let before = marks.len();
        marks.extend(flags.iter().map(|f| (*f).clone()));
        Unmark(before)
    });
    f()
}

/// Whether the job this thread runs is abandoned (never, outside a marked job).
pub fn abandoned() -> bool {
    MARKS.with(|m| m.borrow().iter().any(Abandon::is_raised))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_hold_while_the_job_runs_and_nest() {
        let (pool, job) = (Abandon::default(), Abandon::default());
        assert!(!abandoned());
        run_marked(&[&pool], || {
            run_marked(&[&job], || {
                assert!(!abandoned());
                job.raise();
                assert!(abandoned());
            });
            assert!(!abandoned(), "the inner job's mark ends with it");
            pool.raise();
            assert!(abandoned());
        });
        assert!(!abandoned(), "no mark outside a job");
    }

    #[test]
    fn a_panicking_job_takes_its_marks_with_it() {
        let job = Abandon::default();
        job.raise();
        let caught = std::panic::catch_unwind(|| run_marked(&[&job], || panic!("job failed")));
        assert!(caught.is_err());
        assert!(!abandoned());
    }
}
