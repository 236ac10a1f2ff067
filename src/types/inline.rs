//! Work tried on a connection's own task before it is handed to a blocking thread. While
//! [`try_inline`] runs a job, the index's reads take only what is in memory (RocksDB's memtables
//! and block cache), at most the rows the job was given, and never the kernel's block files: the
//! first read that would go further refuses ([`refuse_inline`]) and fails, and the job's result
//! is thrown away, to be built again where reads may block. So an answer from memory costs no
//! hand-off, and a slow disk or a long answer never holds one of the runtime's threads.

use std::cell::Cell;

thread_local! {
    /// The rows the inline job running on this thread may still read (`None`: no inline job),
    /// and whether a read refused.
    static INLINE: Cell<Option<Inline>> = const { Cell::new(None) };
}

#[derive(Debug, Clone, Copy)]
struct Inline {
    allowed: u64,
    read: u64,
    refused: bool,
}

/// Runs `f` as an inline job allowed `rows` rows read from memory: `None` when one of its
/// reads refused (its result, whatever `f` made of the failure, is dropped). Inline jobs do
/// not nest: an inner one runs under the outer one's limits.
pub fn try_inline<T>(rows: u64, f: impl FnOnce() -> T) -> Option<T> {
    struct Restore(Option<Inline>);
    impl Drop for Restore {
        fn drop(&mut self) {
            INLINE.with(|i| i.set(self.0));
        }
    }
    let outer = INLINE.with(Cell::get);
    if outer.is_some() {
        let out = f();
        return (!inline_refused()).then_some(out);
    }
    let _restore = Restore(None);
    INLINE.with(|i| {
        i.set(Some(Inline {
            allowed: rows,
            read: 0,
            refused: false,
        }))
    });
    let out = f();
    (!inline_refused()).then_some(out)
}

/// Whether an inline job runs on this thread: reads must not block.
pub fn inline() -> bool {
    INLINE.with(Cell::get).is_some()
}

/// Counts `rows` read by an inline job; `false` (the job refused) once it has read more than
/// it was given. Always `true` outside an inline job.
pub fn inline_rows(rows: u64) -> bool {
    INLINE.with(|i| match i.get() {
        None => true,
        Some(mut job) => {
            job.read = job.read.saturating_add(rows);
            job.refused |= job.read > job.allowed;
            i.set(Some(job));
            !job.refused
        }
    })
}

/// Whether a read that may wait for the disk (a block file, the kernel) may run on this
/// thread: not in an inline job, which it refuses.
pub fn may_block() -> bool {
    match inline() {
        true => {
            refuse_inline();
            false
        }
        false => true,
    }
}

/// Marks the inline job running on this thread as refused: a read needs the disk.
pub fn refuse_inline() {
    INLINE.with(|i| {
        if let Some(mut job) = i.get() {
            job.refused = true;
            i.set(Some(job));
        }
    });
}

/// Whether the inline job running on this thread was refused (`false` outside one).
pub fn inline_refused() -> bool {
    INLINE.with(|i| i.get().is_some_and(|job| job.refused))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_within_its_rows_keeps_its_result() {
        assert!(!inline());
        let out = try_inline(3, || {
            assert!(inline());
            assert!(inline_rows(1) && inline_rows(1));
            7
        });
        assert_eq!(out, Some(7));
        assert!(!inline(), "the mark ends with the job");
        assert!(inline_rows(1_000_000), "no limit outside a job");
    }

    #[test]
    fn a_job_over_its_rows_or_refused_loses_its_result() {
        let over = try_inline(2, || {
            assert!(inline_rows(1) && inline_rows(1), "two rows allowed");
            assert!(!inline_rows(1), "the third is one too many");
            assert!(!inline_rows(1), "and it stays refused");
            "partial"
        });
        assert_eq!(over, None);
        let refused = try_inline(100, || {
            refuse_inline();
            assert!(inline_refused());
            "swallowed the error"
        });
        assert_eq!(refused, None);
        assert_eq!(
            try_inline(100, may_block),
            None,
            "a read that may block refuses"
        );
        assert!(may_block(), "and may block outside a job");
        assert!(!inline_refused(), "nothing refused outside a job");
        refuse_inline();
        assert!(!inline());
    }

    #[test]
    fn a_panicking_job_takes_its_mark_with_it() {
        let caught = std::panic::catch_unwind(|| try_inline(5, || panic!("job failed")));
        assert!(caught.is_err());
        assert!(!inline());
    }

    #[test]
    fn an_inner_job_runs_under_the_outer_limits() {
        let out = try_inline(2, || {
            let inner = try_inline(1_000, || inline_rows(2) && inline_rows(1));
            (inner, inline_refused())
        });
        assert_eq!(out, None, "the outer job read past its rows");
    }
}
