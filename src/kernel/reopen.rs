//! The chainstate manager behind a lock that lets it be closed and opened again while the
//! validator is shared. The kernel writes its chainstate and block index to disk whole only when
//! its manager is closed; a snapshot closes it, copies the files and opens it again.

use std::cell::Cell;
use std::marker::PhantomData;
use std::ops::Deref;

use bitcoinkernel::ChainstateManager;
use parking_lot::{RwLock, RwLockReadGuard};

thread_local! {
    /// How many read guards this thread holds.
    static HELD: Cell<usize> = const { Cell::new(0) };
}

/// The chainstate manager, closed only under the write lock and open again before it is
/// released.
pub(super) struct Reopenable {
    slot: RwLock<Option<ChainstateManager>>,
}

/// A read of the open manager. It stays on the thread that took it (its count is per thread).
pub(super) struct Held<'a> {
    guard: RwLockReadGuard<'a, Option<ChainstateManager>>,
    _same_thread: PhantomData<std::sync::MutexGuard<'static, ()>>,
}

impl Reopenable {
    /// Wraps an open manager.
    pub fn new(manager: ChainstateManager) -> Self {
        Reopenable {
            slot: RwLock::new(Some(manager)),
        }
    }

    /// The open manager. A closer waiting for the lock keeps new readers out, except a thread
    /// that already holds a read: it reads again at once (waiting would wait for itself).
    pub fn get(&self) -> Held<'_> {
        let guard = match HELD.get() {
            0 => self.slot.read(),
            _ => self.slot.read_recursive(),
        };
        HELD.set(HELD.get() + 1);
        Held {
            guard,
            _same_thread: PhantomData,
        }
    }

    /// Closes the manager (the kernel flushes everything to disk), runs `while_closed`, and
    /// opens it again with `open`; every read waits meanwhile. `None` when this thread holds a
    /// read itself (the close would wait for it forever). A manager that cannot be opened again
    /// ends the process: nothing can be read or validated without it, and a restart opens it as
    /// after a crash.
    pub fn closed_for<T>(
        &self,
        while_closed: impl FnOnce() -> T,
        mut open: impl FnMut() -> Result<ChainstateManager, String>,
    ) -> Option<T> {
        if HELD.get() > 0 {
            return None;
        }
        let mut slot = self.slot.write();
        drop(slot.take());
        let out = while_closed();
        let mut last = String::new();
        for attempt in 0..3 {
            if attempt > 0 {
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
            match open() {
                Ok(manager) => {
                    *slot = Some(manager);
                    return Some(out);
                }
                Err(e) => last = e,
            }
        }
        tracing::error!(
            "the kernel could not be opened again after it was closed: {last}; cairn exits (a restart opens it as after a crash)"
        );
        std::process::exit(1)
    }
}

impl<'a> Held<'a> {
    /// The manager for as long as the lock's owner lives rather than this guard, for a reader
    /// that keeps the guard beside what it borrows from the manager.
    ///
    /// # Safety
    /// The caller keeps this guard alive, and drops it after everything borrowed from the
    /// returned reference: the manager is only closed once every guard is gone.
    pub unsafe fn outliving(&self) -> &'a ChainstateManager {
        let manager: *const ChainstateManager = self.deref();
        // SAFETY: the manager is not moved or dropped while any read guard exists (closing it
        // takes the write lock), and the caller keeps this guard until the borrow ends.
        unsafe { &*manager }
    }
}

impl Deref for Held<'_> {
    type Target = ChainstateManager;

    fn deref(&self) -> &ChainstateManager {
        match self.guard.as_ref() {
            Some(manager) => manager,
            None => unreachable!("closed only under the write lock, opened again before release"),
        }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        HELD.set(HELD.get().saturating_sub(1));
    }
}
