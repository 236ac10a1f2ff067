pub mod logging;

pub use logging::{disable_logging, Log, LogCategory, LogLevel, Logger};
