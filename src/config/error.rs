//! What can be wrong with a configuration.

use std::path::PathBuf;

/// Errors from reading or checking the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file that was asked for.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The config file is not valid TOML or has an unknown or mistyped option.
    #[error("config file {path}: {message}")]
    Parse {
        /// The file that was read.
        path: PathBuf,
        /// The parser's message, naming the line and the option.
        message: String,
    },
    /// An option has a value that cannot be used.
    #[error("invalid value for {option}: {message}")]
    Invalid {
        /// The option's name.
        option: &'static str,
        /// Why the value is wrong.
        message: String,
    },
}
