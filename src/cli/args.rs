//! The command line's arguments: the commands and their options (the options every command
//! shares are `cairn::config::Flags`).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use cairn::config::Flags;

/// cairn: a validating Electrum and compact-filter server on Bitcoin Core's kernel.
#[derive(Parser, Debug)]
#[command(name = "cairn", version, about)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) flags: Flags,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Validate blocks from Bitcoin Core block files or a hex file.
    Import(ImportArgs),
    /// Write a deterministic, consensus-valid regtest chain as blk*.dat files and hex lines.
    Generate(GenerateArgs),
    /// Open the node and serve until stopped.
    Run {
        /// Validate only: no index and no Electrum server (the baseline for benchmarks).
        #[arg(long)]
        no_index: bool,
    },
    /// Generate a small regtest chain into the data folder, validate it, and serve it.
    Demo(DemoArgs),
    /// Print the node's tips (asks a running cairn when one holds the data folder).
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Ask a running cairn to stop.
    Stop,
    /// Ask a running cairn for a snapshot a new node starts from (`cairn run --datadir DIR`):
    /// written into DIR/<network>, with a manifest, while it keeps serving.
    Snapshot {
        /// The data folder to write it into (DIR/<network> must not exist).
        dir: PathBuf,
    },
    /// Compact the index and print its size per column family and per transaction.
    IndexStats,
    /// Rebuild the index from the kernel's stored blocks and undo data, without validating
    /// again (after an index upgrade, or to measure the indexer alone).
    Reindex {
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Debug)]
pub(crate) struct ImportArgs {
    /// A Bitcoin Core `blocks/` folder with blk*.dat files (xor.dat obfuscation is handled).
    #[arg(
        long,
        conflicts_with = "blocks_file",
        required_unless_present = "blocks_file"
    )]
    pub(crate) blocks_dir: Option<PathBuf>,
    /// A file with one hex-encoded block per line.
    #[arg(long)]
    pub(crate) blocks_file: Option<PathBuf>,
    /// No progress bar or progress lines.
    #[arg(long)]
    pub(crate) quiet: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    /// Validate only, without indexing (the baseline for benchmarks).
    #[arg(long)]
    pub(crate) no_index: bool,
}

#[derive(Args, Debug)]
pub(crate) struct GenerateArgs {
    /// Number of blocks after genesis.
    #[arg(long)]
    pub(crate) blocks: u32,
    /// Transactions per block besides the coinbase (once enough coins have matured), at most what
    /// fits in the consensus weight and sigop limits.
    #[arg(long, default_value_t = 50)]
    pub(crate) txs_per_block: u32,
    /// The seed: the same seed gives the same chain.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Output folder: blocks/blk*.dat and blocks.hex are written there.
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// Also pay a BIP84 wallet of this many receive addresses (2% of all outputs, or
    /// `--wallet-per-mille`; its descriptors are written to OUT/wallet.txt), for wallet-sync
    /// benchmarks.
    #[arg(long, default_value_t = 0)]
    pub(crate) wallet_addresses: u32,
    /// The wallet's share of all outputs, per thousand (1 to 1000; 20 is 2%): a smaller share
    /// keeps a long chain's wallet as large as a client can restore.
    #[arg(
        long,
        default_value_t = cairn::generate::WALLET_PER_MILLE,
        requires = "wallet_addresses",
        value_parser = clap::value_parser!(u32).range(1..=1000)
    )]
    pub(crate) wallet_per_mille: u32,
    /// Also pay this many outputs per thousand (at most 1000) to one script, for a history as
    /// long as a benchmark needs (500: about one history entry per transaction).
    #[arg(long, default_value_t = 0)]
    pub(crate) hot_per_mille: u32,
    /// Copy each transaction's shape (input count and kinds, output script kinds, OP_RETURN
    /// sizes) from a random transaction of a real block: `mainnet` is block 951658.
    #[arg(long, value_enum)]
    pub(crate) shape: Option<ShapeSource>,
    /// `none`: spend every output without a signature (P2SH, P2WSH and taproot script-path
    /// spends of the same kinds' shapes and sizes), which costs the kernel what mainnet costs
    /// below its assume-valid block (the outputs of `--wallet-addresses` stay signed: a wallet
    /// restores them); `all` (default): real ECDSA and Schnorr signatures.
    #[arg(long, value_enum, default_value_t = Signatures::All)]
    pub(crate) signatures: Signatures,
    /// Also pay a silent-payment (BIP352) wallet with this many transactions per thousand (at
    /// most 1000; its address, labels 1 and 2 and change's; its keys and every payment are
    /// written to OUT/silent-payments.json), for scanner tests and benchmarks.
    #[arg(long, default_value_t = 0)]
    pub(crate) silent_payments_per_mille: u32,
}

/// Whether `cairn generate` signs its spends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Signatures {
    /// Real signatures on every input.
    All,
    /// No signature anywhere.
    None,
}

/// Where `cairn generate --shape` takes its transaction shapes from.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum ShapeSource {
    /// Mainnet block 951658 (374 transactions, mined 2026).
    Mainnet,
}

#[derive(Args, Debug)]
pub(crate) struct DemoArgs {
    /// Blocks of the demo chain.
    #[arg(long, default_value_t = 300)]
    pub(crate) blocks: u32,
    /// Transactions per block of the demo chain.
    #[arg(long, default_value_t = 25)]
    pub(crate) txs_per_block: u32,
    /// Generate, validate and exit instead of serving.
    #[arg(long)]
    pub(crate) no_serve: bool,
}
