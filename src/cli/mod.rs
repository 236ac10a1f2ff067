//! The command line's parts: its arguments, its commands, a node's life from open to exit, and
//! the signals that end it.

pub mod args;
pub mod commands;
pub mod lifecycle;
pub mod signals;
