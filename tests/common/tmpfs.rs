//! A small tmpfs mounted for a test's life: a file system that fills (needs root, as
//! `.ci/run` has).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted for the test's life.
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    /// Mounts `mib` MiB at `at` (created if missing).
    pub fn mount(at: &Path, mib: u64) -> Self {
        std::fs::create_dir_all(at).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(at)
            .output()
            .expect("mount");
        assert!(
            out.status.success(),
            "mount -t tmpfs (the test needs root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs(at.to_path_buf())
    }

    /// Its free bytes.
    pub fn free(&self) -> u64 {
        cairn::datadir::space::free_bytes(&self.0).unwrap()
    }

    /// Writes a file that leaves `leave` bytes free (0: until the file system is full).
    pub fn fill(&self, leave: u64) -> PathBuf {
        let path = self.0.join("filler");
        let mut file = std::fs::File::create(&path).unwrap();
        let chunk = vec![0x5a_u8; 1 << 20];
        loop {
            let free = self.free();
            if free <= leave {
                break;
            }
            let n = (free - leave).min(chunk.len() as u64) as usize;
            if file
                .write_all(&chunk[..n])
                .and_then(|_| file.flush())
                .is_err()
            {
                break; // full
            }
        }
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}
