//! The `cairn` command line: its arguments (`cli/args.rs`) read into settings, then one
//! command run (`cli/commands.rs`; `run`, a node's whole life, is `cli/lifecycle.rs`).

mod cli;

use std::io::IsTerminal;

use anyhow::{Context, Result};
use clap::Parser;

use cli::args::{Cli, Command};
use cli::commands::{demo, generate, import, index_stats, reindex, snapshot, status, stop};
use cli::lifecycle::run;

fn main() {
    let cli = Cli::parse();
    let code = match real_main(cli) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e:#}");
            1
        }
    };
    std::process::exit(code);
}

fn init_logging(filter: &str) -> Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .with_context(|| format!("invalid log filter {filter:?}"))?;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let lines = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    tracing_subscriber::registry()
        .with(filter)
        .with(lines)
        .with(cairn::metrics::log_lines::LogLines)
        .init();
    Ok(())
}

fn real_main(cli: Cli) -> Result<()> {
    // generate needs no network or data folder: it is answered before settings are read.
    if let Command::Generate(args) = &cli.command {
        init_logging(cli.flags.options.log.as_deref().unwrap_or("info"))?;
        return generate(args);
    }
    // The demo runs on regtest unless told otherwise (and refuses any other); every other
    // command on mainnet, as bitcoind.
    let settings = match cli.command {
        Command::Demo(_) => cli.flags.settings_on(cairn::types::Network::Regtest)?,
        _ => cli.flags.settings()?,
    };
    init_logging(&settings.log)?;
    match cli.command {
        Command::Import(args) => import(settings, &args),
        Command::Run { no_index } => run(settings, !no_index),
        Command::Demo(args) => demo(settings, &args),
        Command::Status { json } => status(settings, json),
        Command::Stop => stop(settings),
        Command::Snapshot { dir } => snapshot(settings, &dir),
        Command::IndexStats => index_stats(settings),
        Command::Reindex { json } => reindex(settings, json),
        Command::Generate(args) => generate(&args),
    }
}
