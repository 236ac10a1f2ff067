//! The raw row reader: every read works on one [`IndexView`] (the indexed chain and a RocksDB
//! snapshot taken together, [`Index::view`]) and holds no lock while it reads, so the writer's
//! batches never wait for a query, and no query sees a block half written or half undone. Each
//! view counts the rows and bytes it reads ([`Cost`]). The domain questions servers ask are
//! answered above it, in `crate::view`.

use std::cell::{Cell, OnceCell};
use std::sync::Arc;

use bitcoin::{BlockHash, Txid};
use rocksdb::Snapshot;

use super::chain::IndexedChain;

use super::{Index, IndexError};
use crate::kernel::blockfiles::FilePos;
use crate::store::schema::{
    cf, meta, scripthash_prefix, BlockPosRow, BlockRow, FilterRow, HistoryKey, OutPointNum,
    RowError, SpentRow, TxRow, TxidKey, UtxoKey,
};
use crate::store::StoreError;
use crate::types::{Coin, ScriptHash, TxNum, TXNUM_LEN};

mod tweaks;

/// One confirmed transaction of a script's history (the index's part of a
/// [`crate::types::HistoryEntry`]: no fee, a block height).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfirmedEntry {
    /// The transaction.
    pub txid: Txid,
    /// Its block height.
    pub height: u32,
}

impl From<ConfirmedEntry> for crate::types::HistoryEntry {
    fn from(entry: ConfirmedEntry) -> Self {
        crate::types::HistoryEntry::confirmed(entry.txid, entry.height)
    }
}

/// One confirmed unspent output of a script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnspentOutput {
    /// The transaction that created it.
    pub txid: Txid,
    /// Its index.
    pub vout: u32,
    /// The creating block's height.
    pub height: u32,
    /// Amount in satoshis.
    pub value: u64,
}

/// A confirmed output's spending input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spend {
    /// The spent output's index.
    pub vout: u32,
    /// The spending transaction.
    pub txid: Txid,
    /// Its input that spends the output.
    pub vin: u32,
    /// The spending block's height.
    pub height: u32,
}

/// A confirmed transaction as read from the chain: its bytes, decoded, and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfirmedTx {
    /// Its bytes, as its block holds them.
    pub bytes: Vec<u8>,
    /// The same, decoded.
    pub tx: bitcoin::Transaction,
    /// Where it is.
    pub position: TxPosition,
}

/// Where a confirmed transaction is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxPosition {
    /// Its global number.
    pub txnum: TxNum,
    /// Block height.
    pub height: u32,
    /// Position in the block.
    pub pos: u32,
    /// Byte offset in the serialized block.
    pub offset: u32,
    /// Serialized length.
    pub len: u32,
}

/// Query errors.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The index failed.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// The answer would have more entries than allowed.
    #[error("history too large: more than {limit} entries")]
    TooLarge {
        /// The configured limit.
        limit: usize,
    },
    /// Nobody waits for the answer any more: its client went, or the server is stopping.
    #[error("the request was abandoned")]
    Abandoned,
    /// An inline job ([`crate::types::try_inline`]) read past what it may: more rows than it
    /// was given, or a row not in memory. Its answer is built again where reads may block.
    #[error("the answer needs more than memory holds; asked again in the query pool")]
    NotInline,
}

impl From<StoreError> for QueryError {
    fn from(e: StoreError) -> Self {
        QueryError::Index(e.into())
    }
}

impl From<RowError> for QueryError {
    fn from(e: RowError) -> Self {
        QueryError::Index(e.into())
    }
}

/// History entries read and resolved to txids at a time: a page's txids come from one batched
/// multi-get, and a page is all a history answer holds in memory at once.
pub const HISTORY_PAGE: usize = 4096;

/// Most transaction rows one request (one [`IndexView`]) keeps in RocksDB's block cache (at most
/// 32 MiB of 4 KiB blocks, an eighth of the default cache); it reads the rest without keeping
/// them (see `IndexView::txids_at`).
const CACHED_READ_ROWS: usize = 8192;

/// What reads cost: store rows visited (keys and values alike) and the bytes they and any
/// block-file reads brought in. Every answer built from an [`IndexView`] can report it, so that
/// a server can charge its client for the work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cost {
    /// Rows read from the store.
    pub rows: u64,
    /// Bytes read: keys and values from the store, transaction bytes from block files.
    pub bytes: u64,
}

impl Cost {
    /// The sum of two costs.
    pub fn plus(self, other: Cost) -> Cost {
        Cost {
            rows: self.rows.saturating_add(other.rows),
            bytes: self.bytes.saturating_add(other.bytes),
        }
    }
}

/// One view of the index (the indexed chain and a store snapshot taken together): every read of
/// one request, however many steps it takes, sees the same blocks. It counts what it reads.
pub struct IndexView<'a> {
    index: &'a Index,
    chain: Arc<IndexedChain>,
    snap: Snapshot<'a>,
    cost: Cell<Cost>,
    /// Whether tweaks can be served, read from the snapshot once per view.
    tweaks_ready: OnceCell<bool>,
    /// Whether the index knew every tweak built before the snapshot was taken.
    tweaks_built: bool,
    /// Transaction rows this view has read (past [`CACHED_READ_ROWS`], it reads them without
    /// keeping their blocks in the block cache).
    tx_rows_read: Cell<usize>,
}

impl IndexView<'_> {
    /// What this view has read so far.
    pub fn cost(&self) -> Cost {
        self.cost.get()
    }

    /// The indexed chain the view shows.
    pub fn chain(&self) -> &IndexedChain {
        &self.chain
    }

    /// The tip the view shows.
    pub fn tip(&self) -> Option<(u32, BlockHash)> {
        self.chain.tip()
    }

    /// Whether the view's chain has this block at this height.
    pub fn has_block(&self, height: u32, hash: &BlockHash) -> bool {
        self.chain.hash(height).as_ref() == Some(hash)
    }

    /// The TxNum after the view's last transaction: the view holds every row below it.
    pub fn next_txnum(&self) -> TxNum {
        self.chain.next_txnum()
    }

    /// Counts a read; fails once the request is abandoned ([`crate::types::abandoned`]), so
    /// that work nobody waits for stops at its next read, and once an inline job has read
    /// all it may ([`crate::types::inline_rows`]).
    fn charge(&self, rows: u64, bytes: usize) -> Result<(), QueryError> {
        self.cost.set(self.cost.get().plus(Cost {
            rows,
            bytes: bytes as u64,
        }));
        if crate::types::abandoned() {
            return Err(QueryError::Abandoned);
        }
        match crate::types::inline_rows(rows) {
            true => Ok(()),
            false => Err(QueryError::NotInline),
        }
    }

    /// Counts work answered from a cache as the `rows` and `bytes` it stands for, as [`charge`]
    /// counts a read: a request costs the same whether or not another asked the same before.
    ///
    /// [`charge`]: IndexView::charge
    pub fn charge_kept(&self, rows: u64, bytes: usize) -> Result<(), QueryError> {
        self.charge(rows, bytes)
    }

    /// One row, counted.
    fn get(&self, cf: &'static str, key: &[u8]) -> Result<Option<Vec<u8>>, QueryError> {
        self.get_with(cf, key, <[u8]>::to_vec)
    }

    /// One row, counted, mapped in place by `f` (no copy of its value).
    fn get_with<T>(
        &self,
        cf: &'static str,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, QueryError> {
        let mut len = 0;
        let mapped = self
            .index
            .store()
            .read_at_with(&self.snap, cf, key, |value| {
                len = value.len();
                f(value)
            })?;
        self.charge(1, key.len() + len)?;
        Ok(mapped)
    }

    /// Visits the rows under `prefix` from `start` on (backwards when asked), counted.
    fn walk(
        &self,
        cf: &'static str,
        prefix: &[u8],
        start: &[u8],
        backwards: bool,
        f: impl FnMut(&[u8], &[u8]) -> Result<bool, QueryError>,
    ) -> Result<(), QueryError> {
        self.walk_charging(cf, prefix, start, backwards, 1, f)
    }

    /// [`IndexView::walk`], each row counted as `rows_each` rows (its bytes always).
    fn walk_charging(
        &self,
        cf: &'static str,
        prefix: &[u8],
        start: &[u8],
        backwards: bool,
        rows_each: u64,
        mut f: impl FnMut(&[u8], &[u8]) -> Result<bool, QueryError>,
    ) -> Result<(), QueryError> {
        let counted = |key: &[u8], value: &[u8]| {
            self.charge(rows_each, key.len() + value.len())?;
            // Rows charged as a part of one still take their time: an inline job counts each.
            if rows_each == 0 && !crate::types::inline_rows(1) {
                return Err(QueryError::NotInline);
            }
            f(key, value)
        };
        let store = self.index.store();
        match backwards {
            true => store.for_each_back_from(&self.snap, cf, prefix, start, counted),
            false => store.for_each_from(&self.snap, cf, prefix, start, counted),
        }
    }

    /// The TxNum of a confirmed txid (rows of blocks the view's chain does not show included:
    /// callers check with `locate`). A txid prefix can name several transactions; the tx row
    /// tells them apart.
    fn txnum_of(&self, txid: &Txid) -> Result<Option<TxNum>, QueryError> {
        let mut candidates = Vec::new();
        let prefix = TxidKey::prefix(txid);
        self.walk(cf::TXID, &prefix, &prefix, false, |key, _| {
            candidates.push(TxidKey::decode(key)?);
            Ok(true)
        })?;
        let mut found = None;
        for txnum in candidates {
            if let Some(bytes) = self.get(cf::TXS, &TxRow::key(txnum))? {
                if TxRow::decode(&bytes)?.txid == *txid {
                    found = Some(txnum);
                }
            }
        }
        Ok(found)
    }

    /// The txids of transaction numbers (ascending), in batched multi-gets. (Stepping one
    /// iterator through the rows instead was slower: 133 ms against 103 ms for a 140k-entry
    /// history.) Past the view's first [`CACHED_READ_ROWS`] rows, the reads pass RocksDB's block
    /// cache by (their blocks are not kept): a long history's rows lie one to a block across the
    /// whole chain (a million of them, 4 GB of blocks, for the busiest script of ten times chain
    /// M), and kept they pushed every small request's blocks out of the cache: those took
    /// 0.38 ms instead of 0.08 ms beside them (`electrum_load --only "get_balance,get_history
    /// huge"` there). A smaller request keeps its blocks, so a repeated `listunspent` of a few
    /// thousand outputs stays in memory.
    fn txids_at(&self, txnums: impl Iterator<Item = TxNum>) -> Result<Vec<Txid>, QueryError> {
        const CHUNK: usize = 1024;
        let store = self.index.store();
        let txnums: Vec<TxNum> = txnums.collect();
        let mut out = Vec::with_capacity(txnums.len());
        for chunk in txnums.chunks(CHUNK) {
            let keys: Vec<_> = chunk.iter().map(|t| TxRow::key(*t)).collect();
            let read = self.tx_rows_read.get() + chunk.len();
            self.tx_rows_read.set(read);
            let fill_cache = read <= CACHED_READ_ROWS;
            let rows =
                store.multi_read_at(&self.snap, cf::TXS, &keys, true, fill_cache, |bytes| {
                    (bytes.len(), TxRow::decode(bytes))
                })?;
            for ((txnum, key), row) in chunk.iter().zip(&keys).zip(rows) {
                let Some((len, row)) = row else {
                    return Err(IndexError::Inconsistent(format!("no tx row {}", txnum.0)).into());
                };
                self.charge(1, key.len() + len)?;
                out.push(row?.txid);
            }
        }
        Ok(out)
    }

    /// How many confirmed history entries a script has from TxNum `from` on; `TooLarge` past
    /// `limit`. Reads keys only.
    pub fn history_len(
        &self,
        sh: &ScriptHash,
        from: TxNum,
        limit: usize,
    ) -> Result<usize, QueryError> {
        let mut count = 0usize;
        let start = HistoryKey::encode(sh, from);
        self.walk(
            cf::HISTORY,
            &scripthash_prefix(sh),
            &start,
            false,
            |key, _| {
                if self.chain.locate(HistoryKey::decode(key)?).is_some() {
                    count += 1;
                    if count > limit {
                        return Err(QueryError::TooLarge { limit });
                    }
                }
                Ok(true)
            },
        )?;
        Ok(count)
    }

    /// Visits a script's confirmed history from TxNum `from` on, in chain order, in pages of at
    /// most `page` entries; stops early when `visit` returns `false`.
    pub fn history_pages(
        &self,
        sh: &ScriptHash,
        from: TxNum,
        page: usize,
        mut visit: impl FnMut(&[ConfirmedEntry]) -> Result<bool, QueryError>,
    ) -> Result<(), QueryError> {
        let page = page.max(1);
        let mut pending: Vec<(TxNum, u32)> = Vec::with_capacity(page);
        let mut more = true;
        let start = HistoryKey::encode(sh, from);
        self.walk(
            cf::HISTORY,
            &scripthash_prefix(sh),
            &start,
            false,
            |key, _| {
                let txnum = HistoryKey::decode(key)?;
                // Rows of a batch whose blocks the chain does not show yet are not visible.
                let Some((height, _)) = self.chain.locate(txnum) else {
                    return Ok(true);
                };
                pending.push((txnum, height));
                if pending.len() == page {
                    more = self.flush(&mut pending, &mut visit)?;
                }
                Ok(more)
            },
        )?;
        if more && !pending.is_empty() {
            self.flush(&mut pending, &mut visit)?;
        }
        Ok(())
    }

    /// The confirmed history of a script, in chain order, at most `limit` entries.
    pub fn history(
        &self,
        sh: &ScriptHash,
        limit: usize,
    ) -> Result<Vec<ConfirmedEntry>, QueryError> {
        let mut found = Vec::new();
        self.history_pages(sh, TxNum(0), HISTORY_PAGE, |page| {
            if found.len() + page.len() > limit {
                return Err(QueryError::TooLarge { limit });
            }
            found.extend_from_slice(page);
            Ok(true)
        })?;
        Ok(found)
    }

    /// A script's confirmed history newest first: at most `limit` entries, all below TxNum
    /// `below` when given.
    pub fn history_newest(
        &self,
        sh: &ScriptHash,
        below: Option<TxNum>,
        limit: usize,
    ) -> Result<Vec<ConfirmedEntry>, QueryError> {
        let start = match below {
            Some(TxNum(0)) => return Ok(Vec::new()),
            Some(TxNum(n)) => HistoryKey::encode(sh, TxNum(n - 1)).to_vec(),
            // After every key of the script: its prefix followed by the largest TxNum bytes.
            None => [&scripthash_prefix(sh)[..], &[0xff; TXNUM_LEN]].concat(),
        };
        let mut found: Vec<(TxNum, u32)> = Vec::new();
        self.walk(
            cf::HISTORY,
            &scripthash_prefix(sh),
            &start,
            true,
            |key, _| {
                let txnum = HistoryKey::decode(key)?;
                if let Some((height, _)) = self.chain.locate(txnum) {
                    found.push((txnum, height));
                }
                Ok(found.len() < limit)
            },
        )?;
        // Read in ascending order, as the batched read wants them.
        found.reverse();
        let txids = self.txids_at(found.iter().map(|(t, _)| *t))?;
        let mut entries: Vec<ConfirmedEntry> = found
            .into_iter()
            .zip(txids)
            .map(|((_, height), txid)| ConfirmedEntry { txid, height })
            .collect();
        entries.reverse();
        Ok(entries)
    }

    /// The TxNum of a transaction in this view's chain, if it is in `sh`'s history.
    pub fn history_txnum(&self, sh: &ScriptHash, txid: &Txid) -> Result<Option<TxNum>, QueryError> {
        let Some(txnum) = self.txnum_of(txid)? else {
            return Ok(None);
        };
        if self.chain.locate(txnum).is_none() {
            return Ok(None);
        }
        Ok(self
            .get(cf::HISTORY, &HistoryKey::encode(sh, txnum))?
            .map(|_| txnum))
    }

    /// Resolves a page's txids and hands it to `visit`.
    fn flush(
        &self,
        pending: &mut Vec<(TxNum, u32)>,
        visit: &mut impl FnMut(&[ConfirmedEntry]) -> Result<bool, QueryError>,
    ) -> Result<bool, QueryError> {
        let txids = self.txids_at(pending.iter().map(|(t, _)| *t))?;
        let entries: Vec<ConfirmedEntry> = pending
            .drain(..)
            .zip(txids)
            .map(|((_, height), txid)| ConfirmedEntry { txid, height })
            .collect();
        visit(&entries)
    }

    /// The confirmed unspent outputs of a script, in chain order; `TooLarge` past `limit`.
    pub fn unspent(&self, sh: &ScriptHash, limit: usize) -> Result<Vec<UnspentOutput>, QueryError> {
        let mut found = Vec::new();
        let prefix = scripthash_prefix(sh);
        self.walk(cf::UTXO, &prefix, &prefix, false, |key, value| {
            let op = UtxoKey::decode(key)?;
            let Some((height, _)) = self.chain.locate(op.txnum) else {
                return Ok(true);
            };
            if found.len() == limit {
                return Err(QueryError::TooLarge { limit });
            }
            found.push((op, height, UtxoKey::decode_value(value)?));
            Ok(true)
        })?;
        let txids = self.txids_at(found.iter().map(|(op, _, _)| op.txnum))?;
        Ok(found
            .into_iter()
            .zip(txids)
            .map(|((op, height, value), txid)| UnspentOutput {
                txid,
                vout: op.vout,
                height,
                value,
            })
            .collect())
    }

    /// The confirmed balance of a script, in satoshis.
    pub fn balance(&self, sh: &ScriptHash) -> Result<u64, QueryError> {
        let mut total = 0u64;
        let prefix = scripthash_prefix(sh);
        self.walk(cf::UTXO, &prefix, &prefix, false, |key, value| {
            let op = UtxoKey::decode(key)?;
            if self.chain.locate(op.txnum).is_some() {
                total = total.saturating_add(UtxoKey::decode_value(value)?);
            }
            Ok(true)
        })?;
        Ok(total)
    }

    /// Where a confirmed transaction is.
    pub fn tx_position(&self, txid: &Txid) -> Result<Option<TxPosition>, QueryError> {
        match self.txnum_of(txid)? {
            Some(txnum) => self.position_of(txnum),
            None => Ok(None),
        }
    }

    /// Where the confirmed transaction `txnum` is.
    fn position_of(&self, txnum: TxNum) -> Result<Option<TxPosition>, QueryError> {
        let Some((height, pos)) = self.chain.locate(txnum) else {
            return Ok(None);
        };
        let row = self
            .get(cf::TXS, &TxRow::key(txnum))?
            .ok_or_else(|| IndexError::Inconsistent(format!("no tx row {}", txnum.0)))?;
        let row = TxRow::decode(&row)?;
        Ok(Some(TxPosition {
            txnum,
            height,
            pos,
            offset: row.offset,
            len: row.len,
        }))
    }

    /// A confirmed transaction's bytes, read straight from the kernel's block files (no kernel
    /// lock), and decoded: the position, the block it names and where that block sits all from
    /// this view. `None` if the transaction is unknown, the files are not mapped, or the bytes
    /// there are not that transaction: they must decode exactly and hash to `txid`. After a
    /// crash a record can hold other bytes than its header says (Core preallocates its files
    /// with zeros, so a record's head can reach the disk before its body, and Core may write
    /// over a record it lost); the caller then asks the kernel. The txid covers everything but
    /// the witnesses.
    pub fn raw_tx(&self, txid: &Txid) -> Result<Option<ConfirmedTx>, QueryError> {
        if self.index.block_files().is_none() {
            return Ok(None);
        }
        let Some(pos) = self.tx_position(txid)? else {
            return Ok(None);
        };
        self.tx_from_files(txid, &pos)
    }

    /// [`Self::raw_tx`] at a position already looked up.
    fn tx_from_files(
        &self,
        txid: &Txid,
        pos: &TxPosition,
    ) -> Result<Option<ConfirmedTx>, QueryError> {
        let Some(files) = self.index.block_files() else {
            return Ok(None);
        };
        let Some(hash) = self.chain.hash(pos.height) else {
            return Ok(None);
        };
        let Some(row) = self.get(cf::BLOCKPOS, &BlockPosRow::key(&hash))? else {
            return Ok(None);
        };
        let row = BlockPosRow::decode(&row)?;
        if pos
            .offset
            .checked_add(pos.len)
            .is_none_or(|end| end > row.len)
        {
            return Err(IndexError::Inconsistent(format!(
                "transaction {txid} lies outside its block"
            ))
            .into());
        }
        let at = FilePos {
            file: row.at.file,
            offset: row.at.offset + u64::from(pos.offset),
        };
        if !crate::types::may_block() {
            return Err(QueryError::NotInline);
        }
        let bytes = files
            .read(at, pos.len)
            .map_err(|e| IndexError::BlockFiles(e.to_string()))?;
        self.charge(0, bytes.len())?;
        match bitcoin::consensus::deserialize::<bitcoin::Transaction>(&bytes) {
            Ok(tx) if tx.compute_txid() == *txid => Ok(Some(ConfirmedTx {
                bytes,
                tx,
                position: *pos,
            })),
            // Logged once per block, when the kernel reads it instead.
            _ => Ok(None),
        }
    }

    /// A confirmed transaction: from the block files directly, through the kernel
    /// (`validator`) only if they are not mapped. `None` if the chain has no such transaction.
    pub fn confirmed_tx(
        &self,
        validator: &crate::kernel::Validator,
        txid: &Txid,
    ) -> Result<Option<ConfirmedTx>, QueryError> {
        let Some(pos) = self.tx_position(txid)? else {
            return Ok(None);
        };
        match self.tx_from_files(txid, &pos)? {
            Some(found) => Ok(Some(found)),
            None => self.tx_through_kernel(validator, txid, &pos),
        }
    }

    /// A confirmed transaction read through the kernel, bytes and decoded: from the block this
    /// view has at its height (not whatever the kernel's chain has there now), checked against
    /// `txid`, the whole block charged.
    fn tx_through_kernel(
        &self,
        validator: &crate::kernel::Validator,
        txid: &Txid,
        pos: &TxPosition,
    ) -> Result<Option<ConfirmedTx>, QueryError> {
        let Some(hash) = self.chain.hash(pos.height) else {
            return Ok(None);
        };
        if !crate::types::may_block() {
            return Err(QueryError::NotInline);
        }
        let block = self.index.kernel_block(validator, &hash)?;
        self.charge(0, block.len())?;
        let wrong = |what: &str| IndexError::Inconsistent(format!("transaction {txid} {what}"));
        let bytes = block
            .get(pos.offset as usize..pos.offset as usize + pos.len as usize)
            .ok_or_else(|| wrong("lies outside its block"))?;
        let tx: bitcoin::Transaction = bitcoin::consensus::deserialize(bytes)
            .map_err(|e| wrong(&format!("does not decode from its block: {e}")))?;
        if tx.compute_txid() != *txid {
            return Err(wrong("is not where the index places it in its block").into());
        }
        Ok(Some(ConfirmedTx {
            bytes: bytes.to_vec(),
            tx,
            position: *pos,
        }))
    }

    /// Whether a confirmed transaction has this output and nothing in the chain spends it
    /// (without reading the transaction: the mempool asks this for every input after each block).
    pub fn is_confirmed_unspent(&self, op: &bitcoin::OutPoint) -> Result<bool, QueryError> {
        let Some(txnum) = self.txnum_of(&op.txid)? else {
            return Ok(false);
        };
        let key = OutPointNum {
            txnum,
            vout: op.vout,
        };
        if self.get(cf::SPENT, &key.encode())?.is_some() {
            return Ok(false);
        }
        // An output index the transaction does not have was never accepted into the mempool.
        Ok(self.chain.locate(txnum).is_some())
    }

    /// A confirmed output that nothing in the chain spends: its script and amount, the height
    /// of its block and whether it is a coinbase output.
    pub fn confirmed_unspent(&self, op: &bitcoin::OutPoint) -> Result<Option<Coin>, QueryError> {
        let Some(txnum) = self.txnum_of(&op.txid)? else {
            return Ok(None);
        };
        let key = OutPointNum {
            txnum,
            vout: op.vout,
        };
        if self.get(cf::SPENT, &key.encode())?.is_some() {
            return Ok(None);
        }
        let Some(pos) = self.position_of(txnum)? else {
            return Ok(None);
        };
        let tx = match self.tx_from_files(&op.txid, &pos)? {
            Some(found) => found.tx,
            None => match self.confirmed_tx_through_kernel(&op.txid, &pos)? {
                Some(tx) => tx,
                None => return Ok(None),
            },
        };
        let Some(out) = tx.output.get(op.vout as usize) else {
            return Ok(None);
        };
        if out.script_pubkey.is_op_return() || pos.height == 0 {
            return Ok(None);
        }
        Ok(Some(Coin {
            output: out.clone(),
            height: pos.height,
            coinbase: pos.pos == 0,
        }))
    }

    /// A confirmed transaction the block files could not give (unmapped, or a record torn by
    /// a crash), decoded, read through the index's kernel; an error without one: never "no such
    /// transaction", never wrong bytes.
    fn confirmed_tx_through_kernel(
        &self,
        txid: &Txid,
        pos: &TxPosition,
    ) -> Result<Option<bitcoin::Transaction>, QueryError> {
        let Some(kernel) = self.index.kernel() else {
            return Err(IndexError::BlockFiles(format!(
                "transaction {txid} is confirmed but not readable from the block files"
            ))
            .into());
        };
        Ok(self
            .tx_through_kernel(&kernel, txid, pos)?
            .map(|found| found.tx))
    }

    /// The txids of a block, in block order.
    pub fn block_txids(&self, height: u32) -> Result<Option<Vec<Txid>>, QueryError> {
        let Some(range) = self.chain.txnums(height) else {
            return Ok(None);
        };
        // The block's rows are consecutive keys: one seek, then the next rows in order, counted
        // as one row per 50 (and their bytes), as ElectrumX charges a block's txids
        // (`len / 2500` units against a history's `len / 50`).
        let mut out = Vec::with_capacity((range.end - range.start) as usize);
        let end = TxRow::key(TxNum(range.end));
        self.walk_charging(
            cf::TXS,
            &[],
            &TxRow::key(TxNum(range.start)),
            false,
            0,
            |key, value| {
                if key >= end.as_slice() {
                    return Ok(false);
                }
                out.push(TxRow::decode(value).map_err(IndexError::from)?.txid);
                Ok(true)
            },
        )?;
        self.charge(1 + out.len() as u64 / 50, 0)?;
        if out.len() as u64 != range.end - range.start {
            return Err(IndexError::Inconsistent(format!(
                "block {height} has {} of its tx rows",
                out.len()
            ))
            .into());
        }
        Ok(Some(out))
    }

    /// Whether every block of this view has its BIP158 filter (false when filters are off, or
    /// while a store upgraded from schema 1 is still building them).
    pub fn filters_ready(&self) -> Result<bool, QueryError> {
        Ok(self.index.filters_enabled() && self.get(cf::META, meta::FILTER_BACKFILL)?.is_none())
    }

    /// The filter and filter header of the view's block at `height`.
    pub fn filter_at(&self, height: u32) -> Result<Option<FilterRow>, QueryError> {
        if self.chain.hash(height).is_none() {
            return Ok(None);
        }
        self.filter_row(height)
    }

    /// The filter row stored at `height`, whatever the chain.
    fn filter_row(&self, height: u32) -> Result<Option<FilterRow>, QueryError> {
        match self.get(cf::FILTERS, &FilterRow::key(height))? {
            Some(bytes) => Ok(Some(FilterRow::decode(&bytes)?)),
            None => Ok(None),
        }
    }

    /// The block hash and filter row of every height in `start..=stop` of the view's chain;
    /// `None` if a height is beyond the view's tip or has no row.
    pub fn filter_rows(
        &self,
        start: u32,
        stop: u32,
    ) -> Result<Option<Vec<(BlockHash, FilterRow)>>, QueryError> {
        let mut out = Vec::with_capacity(stop.saturating_sub(start) as usize + 1);
        for h in start..=stop {
            let Some(hash) = self.chain.hash(h) else {
                return Ok(None);
            };
            match self.filter_row(h)? {
                Some(row) => out.push((hash, row)),
                None => return Ok(None),
            }
        }
        Ok(Some(out))
    }

    /// The transaction and input that spend an output, with the spending block's height.
    pub fn spender(&self, txid: &Txid, vout: u32) -> Result<Option<Spend>, QueryError> {
        let Some(txnum) = self.txnum_of(txid)? else {
            return Ok(None);
        };
        let op = OutPointNum { txnum, vout };
        let Some(bytes) = self.get(cf::SPENT, &op.encode())? else {
            return Ok(None);
        };
        let by = SpentRow::decode(&bytes)?;
        let Some((height, _)) = self.chain.locate(by.txnum) else {
            return Ok(None);
        };
        let row = self
            .get(cf::TXS, &TxRow::key(by.txnum))?
            .ok_or_else(|| IndexError::Inconsistent(format!("no tx row {}", by.txnum.0)))?;
        Ok(Some(Spend {
            vout,
            txid: TxRow::decode(&row)?.txid,
            vin: by.vin,
            height,
        }))
    }

    /// The spent outputs of a confirmed transaction, in output order, with what spends each;
    /// `None` if the chain has no such transaction. One scan of its `spent` rows.
    pub fn spenders(&self, txid: &Txid) -> Result<Option<Vec<Spend>>, QueryError> {
        let Some(txnum) = self.txnum_of(txid)? else {
            return Ok(None);
        };
        let mut found = Vec::new();
        let prefix = txnum.encode();
        self.walk(cf::SPENT, &prefix, &prefix, false, |key, value| {
            let op = OutPointNum::decode(key, cf::SPENT)?;
            let by = SpentRow::decode(value)?;
            // Spends in blocks the view's chain does not show yet are not visible.
            if let Some((height, _)) = self.chain.locate(by.txnum) {
                found.push((op.vout, by, height));
            }
            Ok(true)
        })?;
        let txids = self.txids_at(found.iter().map(|(_, by, _)| by.txnum))?;
        Ok(Some(
            found
                .into_iter()
                .zip(txids)
                .map(|((vout, by, height), txid)| Spend {
                    vout,
                    txid,
                    vin: by.vin,
                    height,
                })
                .collect(),
        ))
    }
}

impl Index {
    /// A view of the index for one request: one chain and one snapshot, however many reads.
    pub fn reader(&self) -> IndexView<'_> {
        // Read before the snapshot is taken: set, the marker was gone before this snapshot.
        let tweaks_built = self.tweaks_built.load(std::sync::atomic::Ordering::Acquire);
        let (chain, snap) = self.view();
        IndexView {
            index: self,
            chain,
            snap,
            cost: Cell::new(Cost::default()),
            tweaks_ready: OnceCell::new(),
            tweaks_built,
            tx_rows_read: Cell::new(0),
        }
    }

    /// The confirmed history of a script, in chain order, at most `limit` entries.
    pub fn history(
        &self,
        sh: &ScriptHash,
        limit: usize,
    ) -> Result<Vec<ConfirmedEntry>, QueryError> {
        self.reader().history(sh, limit)
    }

    /// The confirmed unspent outputs of a script, in chain order, at most `limit`.
    pub fn unspent(&self, sh: &ScriptHash, limit: usize) -> Result<Vec<UnspentOutput>, QueryError> {
        self.reader().unspent(sh, limit)
    }

    /// The confirmed balance of a script, in satoshis.
    pub fn balance(&self, sh: &ScriptHash) -> Result<u64, QueryError> {
        self.reader().balance(sh)
    }

    /// Where a confirmed transaction is.
    pub fn tx_position(&self, txid: &Txid) -> Result<Option<TxPosition>, QueryError> {
        self.reader().tx_position(txid)
    }

    /// See [`IndexView::is_confirmed_unspent`].
    pub fn is_confirmed_unspent(&self, op: &bitcoin::OutPoint) -> Result<bool, QueryError> {
        self.reader().is_confirmed_unspent(op)
    }

    /// See [`IndexView::confirmed_unspent`].
    pub fn confirmed_unspent(&self, op: &bitcoin::OutPoint) -> Result<Option<Coin>, QueryError> {
        self.reader().confirmed_unspent(op)
    }

    /// The txids of a block, in block order.
    pub fn block_txids(&self, height: u32) -> Result<Option<Vec<Txid>>, QueryError> {
        self.reader().block_txids(height)
    }

    /// The transaction and input that spend an output, with the spending block's height.
    pub fn spender(&self, txid: &Txid, vout: u32) -> Result<Option<Spend>, QueryError> {
        self.reader().spender(txid, vout)
    }

    /// The stored block row at a height (header and TxNum range), straight from the store.
    pub fn block_row(&self, height: u32) -> Result<Option<BlockRow>, QueryError> {
        match self.store().get(cf::BLOCKS, &BlockRow::key(height))? {
            Some(bytes) => Ok(Some(BlockRow::decode(&bytes)?)),
            None => Ok(None),
        }
    }
}
