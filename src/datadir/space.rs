//! Free disk space where cairn writes, checked before it takes more blocks. Core checks the same
//! before it writes a block file or flushes (`CheckDiskSpace`, a 50 MiB margin) and stops the
//! node for good when it fails ("Disk space is too low!"); the kernel does this too, and then
//! validates nothing more. cairn keeps a larger margin of its own so that it stops asking for
//! blocks first, keeps answering from what it has, and goes on by itself once space returns.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Free space above the margin needed before a low disk counts as recovered, so that a disk
/// hovering at the margin does not flap between the two.
const RECOVER_SLACK: u64 = 32 << 20;
/// The free space the kernel needs before it writes more: Core's `CheckDiskSpace` margin
/// (50 MiB) and a block file's pre-allocation chunk (16 MiB). With less it stops for good.
pub const KERNEL_MIN_FREE: u64 = (50 + 16) << 20;
/// How long one reading of free space is used.
const READING_AGE: Duration = Duration::from_secs(1);

/// The free bytes an unprivileged writer may use on the file system holding `path`.
pub fn free_bytes(path: &std::path::Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c_path` is a NUL-terminated string and `stat` is writable memory of the size
    // statvfs fills; it is read only when the call succeeded.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), stat.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it filled `stat`.
    let stat = unsafe { stat.assume_init() };
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}

struct Reading {
    at: Instant,
    low: bool,
}

/// Whether the disks under cairn's data folders have room for more blocks; cheap to ask often
/// (one reading a second). Clones share their state.
#[derive(Clone)]
pub struct SpaceWatch {
    paths: Arc<Vec<PathBuf>>,
    min_free: u64,
    last: Arc<Mutex<Option<Reading>>>,
    was_low: Arc<AtomicBool>,
}

impl std::fmt::Debug for SpaceWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpaceWatch")
            .field("paths", &self.paths)
            .field("min_free", &self.min_free)
            .finish()
    }
}

impl SpaceWatch {
    /// Watches the file systems holding `paths`, low below `min_free` bytes free on any of them.
    pub fn new(paths: Vec<PathBuf>, min_free: u64) -> Self {
        SpaceWatch {
            paths: Arc::new(paths),
            min_free,
            last: Arc::default(),
            was_low: Arc::default(),
        }
    }

    /// The margin, bytes.
    pub fn min_free(&self) -> u64 {
        self.min_free
    }

    /// The least free space over the watched paths (a path that cannot be read counts as none
    /// free: it is where the next write would fail).
    pub fn least_free(&self) -> u64 {
        self.paths
            .iter()
            .map(|p| free_bytes(p).unwrap_or(0))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Whether the kernel's own margin is met too, with some slack: what a kernel that stopped
    /// for a full disk needs before it is opened again.
    pub fn has_room_for_kernel(&self) -> bool {
        self.least_free()
            >= self
                .min_free
                .max(KERNEL_MIN_FREE)
                .saturating_add(RECOVER_SLACK)
    }

    /// Whether a kernel's fatal error says the disk was full: Core's "Disk space is too low!",
    /// or a write that failed with ENOSPC.
    pub fn is_disk_error(message: &str) -> bool {
        ["Disk space is too low", "No space left on device", "ENOSPC"]
            .iter()
            .any(|m| message.contains(m))
    }

    /// Whether the disk is too full to take more blocks. Once low, it stays low until the free
    /// space is [`RECOVER_SLACK`] above the margin. The change each way is logged once.
    pub fn is_low(&self) -> bool {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(r) = last.as_ref().filter(|r| r.at.elapsed() < READING_AGE) {
            return r.low;
        }
        let free = self.least_free();
        let was_low = self.was_low.load(Ordering::SeqCst);
        let low = if was_low {
            free < self.min_free.saturating_add(RECOVER_SLACK)
        } else {
            free < self.min_free
        };
        if low != was_low {
            let mib = |b: u64| b >> 20;
            if low {
                tracing::error!(
                    "disk space is too low: {} MiB free, cairn needs {} MiB (min_free_space_mb); it takes no more blocks and keeps answering from what it has until space is freed",
                    mib(free),
                    mib(self.min_free)
                );
            } else {
                tracing::info!(
                    "disk space is back: {} MiB free; taking blocks again",
                    mib(free)
                );
            }
            self.was_low.store(low, Ordering::SeqCst);
        }
        *last = Some(Reading {
            at: Instant::now(),
            low,
        });
        low
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_space_is_read_and_the_margin_applies() {
        let dir = std::env::temp_dir();
        let free = free_bytes(&dir).unwrap();
        assert!(free > 0);
        assert!(free_bytes(std::path::Path::new("/no/such/dir")).is_err());
        assert!(!SpaceWatch::new(vec![dir.clone()], 1).is_low());
        assert!(SpaceWatch::new(vec![dir.clone()], u64::MAX).is_low());
        // An unreadable path counts as full.
        assert!(SpaceWatch::new(vec![dir, "/no/such/dir".into()], 1).is_low());
    }
}
