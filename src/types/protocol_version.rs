//! The version of the Electrum protocol a client and cairn agree on.

/// An Electrum protocol version: `1.4`, `1.4.2` (ordered as numbers, part by part).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProtocolVersion {
    /// The major version.
    pub major: u32,
    /// The minor version.
    pub minor: u32,
    /// The patch level (0 when a client writes none).
    pub patch: u32,
}

impl ProtocolVersion {
    /// `major.minor.patch`.
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        ProtocolVersion {
            major,
            minor,
            patch,
        }
    }
}

/// As `server.version` answers it: `1.4`, `1.4.2`.
impl std::fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.patch {
            0 => write!(f, "{}.{}", self.major, self.minor),
            patch => write!(f, "{}.{}.{patch}", self.major, self.minor),
        }
    }
}
