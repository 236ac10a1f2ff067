//! A deterministic, consensus-valid regtest chain: the test and benchmark workload.
//!
//! From a seed it builds blocks with BIP34 heights and witness commitments, whose transactions
//! spend P2PKH, P2SH-P2WPKH, P2WPKH, P2TR (key path) and 2-of-3 P2WSH outputs with real
//! signatures, carry OP_RETURN outputs, spend each other inside one block, and pay scripts with a
//! heavy-tailed reuse: most once or twice, a few hot ones very often.

mod shape;
mod silent;
mod spend;
mod wallet;

use std::io::Write;
use std::path::{Path, PathBuf};

use bitcoin::absolute::LockTime;
use bitcoin::block::{Header, Version};
use bitcoin::constants::COINBASE_MATURITY;
use bitcoin::hashes::Hash;
use bitcoin::hex::DisplayHex;
use bitcoin::script::Builder;
use bitcoin::secp256k1::{All, Secp256k1};
use bitcoin::transaction::Version as TxVersion;
use bitcoin::{
    Amount, Block, BlockHash, CompactTarget, OutPoint, ScriptBuf, Sequence, Transaction, TxIn,
    TxMerkleNode, TxOut, Witness,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use crate::import::BlkWriter;
use crate::types::Network;
pub use shape::{OutputShape, ShapeError, Shapes, TxShape};
pub use silent::{SpPayment, LABELS as SP_LABELS};
pub use wallet::{derive_key, Owner, ScriptKind, Spending};

/// Regtest halves the subsidy every 150 blocks.
pub const REGTEST_HALVING_INTERVAL: u32 = 150;
/// The weight a block's transactions besides the coinbase may have: the consensus limit less
/// what Core's miner keeps for the header and the coinbase (`-blockreservedweight`, 8,000).
const BLOCK_WEIGHT_ROOM: u64 = bitcoin::Weight::MAX_BLOCK.to_wu() - 8_000;
/// The sigop cost a block's transactions besides the coinbase may have: the consensus limit less
/// the 400 Core's miner keeps for the coinbase.
const BLOCK_SIGOPS_ROOM: u64 = bitcoin::blockdata::constants::MAX_BLOCK_SIGOPS_COST as u64 - 400;
/// Outputs below this are never created (Core's dust limit for the largest standard script).
pub const MIN_OUTPUT: u64 = 1_000;

/// The seed of the BIP32 wallet that `--wallet-addresses` pays (BIP32's test vector 1): the
/// chain's wallet can be restored by anyone from the descriptors written beside it.
const WALLET_SEED: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
/// Outputs paid to the wallet, per thousand, when it exists and
/// [`ChainGenerator::with_wallet_share`] does not set another share.
pub const WALLET_PER_MILLE: u32 = 20;
/// Random coins looked at for one of the kind a shape's input wants, before any coin will do.
const KIND_TRIES: usize = 8;

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct GenerateOptions {
    /// Blocks after genesis.
    pub blocks: u32,
    /// Transactions per block besides the coinbase, once coins have matured, at most what fits
    /// the consensus limits.
    pub txs_per_block: u32,
    /// The seed.
    pub seed: u64,
}

/// What was generated.
#[derive(Debug, Clone)]
pub struct GenerateSummary {
    /// Blocks after genesis.
    pub blocks: u32,
    /// Transactions, coinbases included.
    pub txs: u64,
    /// Serialized bytes of all blocks.
    pub bytes: u64,
    /// The last block's hash.
    pub tip: BlockHash,
    /// History entries (outputs received plus inputs spent) of the most used script.
    pub max_script_history: u64,
    /// Transactions that pay or spend the wallet (0 without one).
    pub wallet_txs: u64,
    /// Distinct scripts paid.
    pub scripts: u64,
    /// Outputs paid to the silent-payment wallet (0 without one).
    pub silent_payments: u64,
}

/// Errors from writing a generated chain.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// Writing the output failed.
    #[error("cannot write the chain to {path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The wallet's keys could not be derived.
    #[error("wallet key derivation: {0}")]
    Wallet(String),
    /// Signing failed (a bug: the generator built an inconsistent transaction).
    #[error("signing failed: {0}")]
    Sign(String),
    /// A transaction too large for any block (a bug: shapes are standard transactions).
    #[error("a generated transaction of weight {weight} and sigop cost {sigops} fits no block")]
    Oversized {
        /// Its weight.
        weight: u64,
        /// Its sigop cost.
        sigops: u64,
    },
}

#[derive(Debug, Clone, Copy)]
struct Coin {
    outpoint: OutPoint,
    value: u64,
    owner: u32,
}

/// Finishes a block after its transactions changed: puts the witness commitment into the
/// coinbase (replacing an earlier one), sets the merkle root and finds a nonce meeting the
/// header's target. Tests use it to build blocks that are well-formed but invalid.
pub fn reseal(block: &mut Block) {
    const COMMITMENT_TAG: [u8; 6] = [0x6a, 0x24, 0xaa, 0x21, 0xa9, 0xed];
    if let Some(coinbase) = block.txdata.first_mut() {
        coinbase
            .output
            .retain(|o| !o.script_pubkey.as_bytes().starts_with(&COMMITMENT_TAG));
    }
    if let Some(witness_root) = block.witness_root() {
        let commitment = Block::compute_witness_commitment(&witness_root, &[0u8; 32]);
        let mut data = COMMITMENT_TAG[2..].to_vec();
        data.extend_from_slice(commitment.as_byte_array());
        if let Some(coinbase) = block.txdata.first_mut() {
            coinbase.output.push(TxOut {
                value: Amount::ZERO,
                script_pubkey: ScriptBuf::new_op_return(wallet::push_bytes(&data)),
            });
        }
    }
    if let Some(root) = block.compute_merkle_root() {
        block.header.merkle_root = root;
    }
    grind(&mut block.header);
}

/// Increments the nonce until the header meets its own target (instant on regtest).
pub fn grind(header: &mut Header) {
    let target = header.target();
    while !target.is_met_by(header.block_hash()) {
        header.nonce = header.nonce.wrapping_add(1);
    }
}

/// Builds a chain block by block; the same options always give the same chain.
#[derive(Clone)]
pub struct ChainGenerator {
    opts: GenerateOptions,
    rng: ChaCha20Rng,
    secp: Secp256k1<All>,
    owners: Vec<Owner>,
    /// History entries per owner (funding and spending), for the summary.
    uses: Vec<u64>,
    hot: Vec<u32>,
    /// Outputs per thousand paid to the first hot script before anything else is drawn.
    hot_per_mille: u32,
    /// Real transactions' shapes to copy, if set (`--shape mainnet`).
    shapes: Option<Shapes>,
    /// Whether new scripts are spent with signatures (`--signatures none`: without).
    spending: Spending,
    warm: Vec<u32>,
    miners: Vec<u32>,
    /// The wallet's receive addresses (owner indexes, contiguous), if it has one.
    wallet: std::ops::Range<u32>,
    /// The wallet's share of all outputs, per thousand.
    wallet_per_mille: u32,
    /// Descriptors of the wallet (receive, change), with private keys.
    wallet_descriptors: Option<(String, String)>,
    wallet_txs: u64,
    /// The silent-payment wallet a share of transactions pays, if set.
    silent: Option<silent::SpWallet>,
    /// Spendable coins.
    coins: Vec<Coin>,
    /// Coinbase coins and the height at which they mature, in height order.
    immature: std::collections::VecDeque<(u32, Coin)>,
    /// A transaction built for the last block that had no room for it; the next one's first.
    carried: Option<spend::Built>,
    prev_hash: BlockHash,
    prev_time: u32,
    height: u32,
}

impl ChainGenerator {
    /// A generator that starts on top of the regtest genesis block.
    pub fn new(opts: GenerateOptions) -> Self {
        let genesis = bitcoin::blockdata::constants::genesis_block(Network::Regtest.to_bitcoin());
        let mut gen = ChainGenerator {
            opts,
            rng: ChaCha20Rng::seed_from_u64(opts.seed),
            secp: Secp256k1::new(),
            owners: Vec::new(),
            uses: Vec::new(),
            hot: Vec::new(),
            hot_per_mille: 0,
            shapes: None,
            spending: Spending::Signed,
            warm: Vec::new(),
            miners: Vec::new(),
            wallet: 0..0,
            wallet_per_mille: WALLET_PER_MILLE,
            wallet_descriptors: None,
            wallet_txs: 0,
            silent: None,
            coins: Vec::new(),
            immature: Default::default(),
            carried: None,
            prev_hash: genesis.block_hash(),
            prev_time: genesis.header.time,
            height: 0,
        };
        // Three hot scripts (exchanges) and twenty warm ones (merchants), all kinds mixed.
        gen.hot = (0..3).map(|_| gen.new_owner(None)).collect();
        gen.warm = (0..20).map(|_| gen.new_owner(None)).collect();
        gen.miners = (0..4)
            .map(|_| gen.new_owner(Some(ScriptKind::P2wpkh)))
            .collect();
        gen
    }

    /// A copy that continues differently from here: a competing branch for reorg tests. Its
    /// blocks spend the same coins as this generator's would, so they conflict.
    pub fn fork(&self, salt: u64) -> Self {
        let mut other = self.clone();
        other.rng = ChaCha20Rng::seed_from_u64(
            self.opts.seed ^ salt.rotate_left(17) ^ u64::from(self.height),
        );
        other
    }

    /// The secret keys of the coinbase receivers (P2WPKH), for tests that restore a wallet which
    /// the chain pays; empty for a signature-free chain, whose coinbases pay scripts that no key
    /// controls.
    pub fn miner_keys(&self) -> Vec<bitcoin::secp256k1::SecretKey> {
        if self.spending == Spending::SignatureFree {
            return Vec::new();
        }
        self.miners
            .iter()
            .map(|&m| derive_key(self.opts.seed, u64::from(m) * 4))
            .collect()
    }

    /// Adds a wallet of `addresses` P2WPKH receive addresses (BIP84 paths `m/84'/1'/0'/0/i` of
    /// [`WALLET_SEED`]) that gets 2% of all outputs from then on (another share:
    /// [`ChainGenerator::with_wallet_share`]) and whose coins are spent like
    /// any other; `write_to` writes its descriptors to `wallet.txt`. Wallet benchmarks (BDK)
    /// restore it. Without this call the chain is the same as before wallets existed.
    pub fn with_wallet(mut self, addresses: u32) -> Result<Self, GenerateError> {
        use bitcoin::bip32::{ChildNumber, DerivationPath, Xpriv};
        let err = |e: bitcoin::bip32::Error| GenerateError::Wallet(e.to_string());
        let master = Xpriv::new_master(bitcoin::NetworkKind::Test, &WALLET_SEED).map_err(err)?;
        let account: DerivationPath = "m/84'/1'/0'".parse().map_err(err)?;
        let account_key = master.derive_priv(&self.secp, &account).map_err(err)?;
        let first = self.owners.len() as u32;
        for i in 0..addresses {
            let path = [
                ChildNumber::Normal { index: 0 },
                ChildNumber::Normal { index: i },
            ];
            let key = account_key.derive_priv(&self.secp, &path).map_err(err)?;
            self.owners.push(Owner::from_keys(
                &self.secp,
                ScriptKind::P2wpkh,
                vec![key.private_key],
            ));
            self.uses.push(0);
        }
        self.wallet = first..first + addresses;
        self.wallet_descriptors = Some((
            format!("wpkh({master}/84'/1'/0'/0/*)"),
            format!("wpkh({master}/84'/1'/0'/1/*)"),
        ));
        Ok(self)
    }

    /// Pays the wallet of [`ChainGenerator::with_wallet`] `per_mille` of all outputs (at most
    /// 1000) instead of 2%: a wallet of a size a client can restore on a long chain. Without this
    /// call (or with 20) the chain is the same as before.
    pub fn with_wallet_share(mut self, per_mille: u32) -> Self {
        self.wallet_per_mille = per_mille.min(1000);
        self
    }

    /// Pays `per_mille` of all outputs (at most 1000) to the busiest script from then on, on top
    /// of its usual share: a history as long as a benchmark needs (500 gives a script about one
    /// history entry per transaction). Without this call the chain is the same as before.
    pub fn with_hot_script(mut self, per_mille: u32) -> Self {
        self.hot_per_mille = per_mille.min(1000);
        self
    }

    /// Shapes every transaction from then on after a random one of `shapes` (its input count
    /// and kinds, output kinds and OP_RETURN sizes), and gives new scripts the kinds of its
    /// payments. Without this call the chain is the same as before.
    pub fn with_shapes(mut self, shapes: Shapes) -> Self {
        self.shapes = Some(shapes);
        self
    }

    /// Spends every output from then on as `spending` says; with
    /// [`Spending::SignatureFree`] the scripts made so far (the miners' and the hot ones) are
    /// made again signature-free, so call it before any block. The wallet of
    /// [`ChainGenerator::with_wallet`] keeps its keys and signatures (a wallet restores it: 2% of
    /// outputs, signed when spent). Without this call
    /// the chain is the same as before.
    pub fn with_spending(mut self, spending: Spending) -> Self {
        debug_assert_eq!(
            self.height, 0,
            "the coins of blocks built would change scripts"
        );
        self.spending = spending;
        if spending == Spending::SignatureFree {
            for (index, owner) in self.owners.iter_mut().enumerate() {
                if !self.wallet.contains(&(index as u32)) {
                    *owner =
                        Owner::signature_free(&self.secp, owner.kind, self.opts.seed, index as u64);
                }
            }
        }
        self
    }

    /// Pays a silent-payment wallet (BIP352; keys from a fixed seed, labels [`SP_LABELS`] and
    /// change's 0) with one or two outputs of `per_mille` transactions out of a thousand from
    /// then on (those with an input key that BIP352 counts), computed with the `silentpayments`
    /// crate; the wallet keeps what it gets (never spent). `write_to` writes its keys and the
    /// payments to `silent-payments.json`. Without this call the chain is the same as before.
    pub fn with_silent_payments(mut self, per_mille: u32) -> Result<Self, GenerateError> {
        let wallet = silent::SpWallet::new(&self.secp, per_mille).map_err(GenerateError::Wallet)?;
        self.silent = Some(wallet);
        Ok(self)
    }

    /// The payments to the silent-payment wallet so far, in chain order (empty without one).
    pub fn silent_payments(&self) -> &[SpPayment] {
        self.silent.as_ref().map_or(&[], |w| w.payments())
    }

    /// The silent-payment wallet's keys, labels and payments as `write_to` writes them to
    /// `silent-payments.json`; `None` without one.
    pub fn silent_wallet(&self) -> Option<serde_json::Value> {
        self.silent.as_ref().map(silent::SpWallet::to_json)
    }

    /// The height of the last block built.
    pub fn height(&self) -> u32 {
        self.height
    }

    fn new_owner(&mut self, kind: Option<ScriptKind>) -> u32 {
        let kind = match (kind, &self.shapes) {
            (Some(kind), _) => kind,
            (None, Some(shapes)) => shapes.payment_kind(&mut self.rng),
            (None, None) => ScriptKind::from_percent(self.rng.gen_range(0..100)),
        };
        let index = self.owners.len() as u64;
        let owner = match self.spending {
            Spending::Signed => Owner::new(&self.secp, kind, self.opts.seed, index),
            Spending::SignatureFree => {
                Owner::signature_free(&self.secp, kind, self.opts.seed, index)
            }
        };
        self.owners.push(owner);
        self.uses.push(0);
        index as u32
    }

    /// Picks who receives an output: mostly new scripts (of `kind` if given), some reuse, a
    /// heavy tail of hot ones.
    fn pick_recipient(&mut self, kind: Option<ScriptKind>) -> u32 {
        if self.hot_per_mille > 0 && self.rng.gen_range(0..1000) < self.hot_per_mille {
            return self.hot[0];
        }
        if !self.wallet.is_empty() && self.rng.gen_range(0..1000) < self.wallet_per_mille {
            return self.rng.gen_range(self.wallet.clone());
        }
        let p: u32 = self.rng.gen_range(0..1000);
        match p {
            0..=79 => {
                // 8% to the hot scripts, shared 50/30/20.
                let q: u32 = self.rng.gen_range(0..10);
                self.hot[match q {
                    0..=4 => 0,
                    5..=7 => 1,
                    _ => 2,
                }]
            }
            80..=99 => self.warm[self.rng.gen_range(0..self.warm.len())],
            100..=379 if self.owners.len() > 30 => {
                // Reuse of an existing script, uniformly: most end with one or two uses.
                self.rng.gen_range(0..self.owners.len()) as u32
            }
            _ => self.new_owner(kind),
        }
    }

    fn subsidy(height: u32) -> u64 {
        let halvings = height / REGTEST_HALVING_INTERVAL;
        if halvings >= 64 {
            0
        } else {
            Amount::from_int_btc(50).to_sat() >> halvings
        }
    }

    /// Builds the next block.
    pub fn next_block(&mut self) -> Result<Block, GenerateError> {
        self.height += 1;
        let height = self.height;
        while self
            .immature
            .front()
            .is_some_and(|(mature, _)| *mature <= height)
        {
            if let Some((_, coin)) = self.immature.pop_front() {
                self.coins.push(coin);
            }
        }
        let mut txs: Vec<Transaction> = Vec::new();
        let mut fees = 0u64;
        let (mut weight, mut sigops) = (0u64, 0u64);
        // Outputs created in this block, spendable by later txs of the same block.
        let mut fresh: Vec<Coin> = Vec::new();
        let target = self.opts.txs_per_block as usize;
        // A transaction the last block had no room for comes first: later ones may spend it.
        let mut next = self.carried.take();
        while txs.len() < target {
            let built = match next.take() {
                Some(built) => built,
                None => match self.build_tx(&mut fresh)? {
                    Some(built) => built,
                    None => break,
                },
            };
            let tx_weight = built.tx.weight().to_wu();
            if weight + tx_weight > BLOCK_WEIGHT_ROOM || sigops + built.sigops > BLOCK_SIGOPS_ROOM {
                if txs.is_empty() {
                    return Err(GenerateError::Oversized {
                        weight: tx_weight,
                        sigops: built.sigops,
                    });
                }
                self.carried = Some(built);
                break;
            }
            weight += tx_weight;
            sigops += built.sigops;
            fees += built.fee;
            if let Some(wallet) = self.silent.as_mut() {
                wallet.record(height, built.tx.compute_txid(), built.paid);
            }
            txs.push(built.tx);
        }
        self.coins.append(&mut fresh);
        let coinbase = self.coinbase(height, Self::subsidy(height) + fees);
        let mut all = Vec::with_capacity(txs.len() + 1);
        all.push(coinbase);
        all.extend(txs);
        let time = self.prev_time + 1 + self.rng.gen_range(0..1200);
        let mut block = Block {
            header: Header {
                version: Version::from_consensus(0x2000_0000),
                prev_blockhash: self.prev_hash,
                merkle_root: TxMerkleNode::all_zeros(),
                time,
                bits: CompactTarget::from_consensus(0x207f_ffff),
                nonce: 0,
            },
            txdata: all,
        };
        reseal(&mut block);
        let cb_txid = block.txdata[0].compute_txid();
        let value = block.txdata[0].output[0].value.to_sat();
        let miner = self.miners[(height as usize) % self.miners.len()];
        self.uses[miner as usize] += 1;
        if value > 0 {
            self.immature.push_back((
                height + COINBASE_MATURITY,
                Coin {
                    outpoint: OutPoint::new(cb_txid, 0),
                    value,
                    owner: miner,
                },
            ));
        }
        self.prev_hash = block.block_hash();
        self.prev_time = time;
        Ok(block)
    }

    fn coinbase(&mut self, height: u32, value: u64) -> Transaction {
        let miner = self.miners[(height as usize) % self.miners.len()];
        let extra: u32 = self.rng.gen();
        let script_sig = Builder::new()
            .push_int(i64::from(height))
            .push_slice(extra.to_le_bytes())
            .into_script();
        let mut witness = Witness::new();
        witness.push([0u8; 32]);
        Transaction {
            version: TxVersion::TWO,
            lock_time: LockTime::ZERO,
            input: vec![TxIn {
                previous_output: OutPoint::null(),
                script_sig,
                sequence: Sequence::MAX,
                witness,
            }],
            output: vec![TxOut {
                value: Amount::from_sat(value),
                script_pubkey: self.owners[miner as usize].script_pubkey.clone(),
            }],
        }
    }

    /// Generates every block into `out`: `blocks/blk*.dat` (Core's format, genesis first) and
    /// `blocks.hex` (one block per line from height 1, like the 206-block test chain).
    pub fn write_to(mut self, out: &Path) -> Result<GenerateSummary, GenerateError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| GenerateError::Io {
                path: path.clone(),
                source,
            }
        };
        let blocks_dir = out.join("blocks");
        std::fs::create_dir_all(&blocks_dir).map_err(io(&blocks_dir))?;
        let hex_path = out.join("blocks.hex");
        let tmp_hex = out.join("blocks.hex.tmp");
        let mut hex_out =
            std::io::BufWriter::new(std::fs::File::create(&tmp_hex).map_err(io(&tmp_hex))?);
        let mut blk = BlkWriter::new(
            &blocks_dir,
            Network::Regtest.magic(),
            BlkWriter::MAX_FILE_SIZE,
        )
        .map_err(io(&blocks_dir))?;
        let mut summary = GenerateSummary {
            blocks: 0,
            txs: 0,
            bytes: 0,
            tip: self.prev_hash,
            max_script_history: 0,
            wallet_txs: 0,
            scripts: 0,
            silent_payments: 0,
        };
        // Core's first block file starts with the genesis block; bitcoind's -loadblock needs it.
        let genesis = bitcoin::blockdata::constants::genesis_block(Network::Regtest.to_bitcoin());
        blk.write_block(&bitcoin::consensus::serialize(&genesis))
            .map_err(io(&blocks_dir))?;
        let _span = tracing::info_span!("generate", blocks = self.opts.blocks).entered();
        for _ in 0..self.opts.blocks {
            let block = self.next_block()?;
            let raw = bitcoin::consensus::serialize(&block);
            blk.write_block(&raw).map_err(io(&blocks_dir))?;
            writeln!(hex_out, "{}", raw.to_lower_hex_string()).map_err(io(&tmp_hex))?;
            summary.blocks += 1;
            summary.txs += block.txdata.len() as u64;
            summary.bytes += raw.len() as u64;
            summary.tip = block.block_hash();
            if summary.blocks.is_multiple_of(500) {
                tracing::info!("generated {} blocks, {} txs", summary.blocks, summary.txs);
            }
        }
        blk.finish().map_err(io(&blocks_dir))?;
        if let Some(built) = self.carried.take() {
            self.forget(built);
        }
        summary.max_script_history = self.uses.iter().copied().max().unwrap_or(0);
        // The busiest script, for benchmarks of long histories.
        if let Some(busiest) = (0..self.uses.len()).max_by_key(|&i| self.uses[i]) {
            let path = out.join("busiest-script.txt");
            let text = format!(
                "{} {}\n",
                self.owners[busiest]
                    .script_pubkey
                    .as_bytes()
                    .to_lower_hex_string(),
                self.uses[busiest]
            );
            std::fs::write(&path, text).map_err(io(&path))?;
        }
        summary.scripts = self.uses.iter().filter(|&&u| u > 0).count() as u64;
        summary.wallet_txs = self.wallet_txs;
        summary.silent_payments = self.silent_payments().len() as u64;
        if let Some(wallet) = &self.silent {
            let path = out.join("silent-payments.json");
            let text = format!("{:#}\n", wallet.to_json());
            std::fs::write(&path, text).map_err(io(&path))?;
        }
        if let Some((receive, change)) = &self.wallet_descriptors {
            let path = out.join("wallet.txt");
            let text = format!(
                "# The wallet this chain pays ({} receive addresses, {} transactions), BIP84 on regtest.\n# receive descriptor, then change descriptor:\n{receive}\n{change}\n",
                self.wallet.len(),
                self.wallet_txs
            );
            std::fs::write(&path, text).map_err(io(&path))?;
        }
        hex_out.flush().map_err(io(&tmp_hex))?;
        drop(hex_out);
        std::fs::rename(&tmp_hex, &hex_path).map_err(io(&hex_path))?;
        Ok(summary)
    }
}
