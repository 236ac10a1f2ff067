//! The command line's parts beside argument parsing: signals and running a node.

pub mod serve;
pub mod signals;
