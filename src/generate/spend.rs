//! Building one transaction of the generated chain: which coins it spends, how many outputs it
//! pays and to whom, its OP_RETURN outputs, and its signatures.

use bitcoin::absolute::LockTime;
use bitcoin::sighash::SighashCache;
use bitcoin::transaction::Version as TxVersion;
use bitcoin::{Amount, OutPoint, ScriptBuf, Sequence, Transaction, TxIn, TxOut, Witness};
use rand::Rng;

use super::{
    wallet, ChainGenerator, Coin, GenerateError, Owner, ScriptKind, TxShape, KIND_TRIES, MIN_OUTPUT,
};

/// A transaction built for the chain, not yet placed in a block.
#[derive(Clone)]
pub(super) struct Built {
    /// The signed transaction.
    pub(super) tx: Transaction,
    /// What it leaves to the miner.
    pub(super) fee: u64,
    /// Its sigop cost as Core's `GetTransactionSigOpCost` counts it.
    pub(super) sigops: u64,
    /// What it pays the silent-payment wallet, recorded at the height it is placed.
    pub(super) paid: super::silent::Paid,
    /// The owners it was counted for in `uses` (inputs and paid recipients).
    pub(super) owners: Vec<u32>,
    /// Whether it was counted as a wallet transaction.
    pub(super) wallet: bool,
}

impl ChainGenerator {
    fn take_coin(&mut self, fresh: &mut Vec<Coin>) -> Option<Coin> {
        let (in_block, i) = self.pick_coin(fresh)?;
        Some(self.remove_coin(fresh, in_block, i))
    }

    /// Takes the coin [`ChainGenerator::pick_coin`] chose.
    fn remove_coin(&mut self, fresh: &mut Vec<Coin>, in_block: bool, i: usize) -> Coin {
        if in_block {
            fresh.swap_remove(i)
        } else {
            self.coins.swap_remove(i)
        }
    }

    /// A random coin, as (whether it is from this block, its index), without taking it. A third
    /// of the time an output of this very block (chains of spends).
    fn pick_coin(&mut self, fresh: &[Coin]) -> Option<(bool, usize)> {
        if !fresh.is_empty() && (self.coins.is_empty() || self.rng.gen_range(0..3) == 0) {
            return Some((true, self.rng.gen_range(0..fresh.len())));
        }
        if self.coins.is_empty() {
            return None;
        }
        Some((false, self.rng.gen_range(0..self.coins.len())))
    }

    /// A coin of `kind` if one of [`KIND_TRIES`] random ones is, else any coin.
    fn take_coin_of(&mut self, fresh: &mut Vec<Coin>, kind: Option<ScriptKind>) -> Option<Coin> {
        if let Some(kind) = kind {
            for _ in 0..KIND_TRIES {
                let (in_block, i) = self.pick_coin(fresh)?;
                let coin = if in_block { fresh[i] } else { self.coins[i] };
                if self.owners[coin.owner as usize].kind == kind {
                    return Some(self.remove_coin(fresh, in_block, i));
                }
            }
        }
        self.take_coin(fresh)
    }

    /// Builds and signs one transaction, or `None` when nothing is spendable.
    pub(super) fn build_tx(
        &mut self,
        fresh: &mut Vec<Coin>,
    ) -> Result<Option<Built>, GenerateError> {
        let shape = match &self.shapes {
            Some(shapes) => Some(shapes.pick(&mut self.rng).clone()),
            None => None,
        };
        let Some(inputs) = self.take_inputs(fresh, shape.as_ref()) else {
            return Ok(None);
        };
        let total_in: u64 = inputs.iter().map(|c| c.value).sum();
        let pool = self.coins.len() + fresh.len();
        let shaped_payments = shape.as_ref().map(TxShape::payments);
        let Some((n_out, fee, with_op_return)) =
            self.plan_outputs(inputs.len(), total_in, pool, shaped_payments)
        else {
            return Ok(None);
        };
        let kinds: Vec<ScriptKind> = shape.iter().flat_map(TxShape::payment_kinds).collect();
        let (mut outputs, recipients) = self.pay_recipients(total_in - fee, n_out, &kinds);
        let data_lens: Vec<usize> = match &shape {
            Some(shape) => shape.data_lens().collect(),
            // Drawn as an i32, as before shapes existed: a usize draw takes other random bits.
            None if with_op_return => vec![self.rng.gen_range(4..=40i32).unsigned_abs() as usize],
            None => Vec::new(),
        };
        for len in data_lens {
            let data: Vec<u8> = (0..len).map(|_| self.rng.gen()).collect();
            outputs.push(TxOut {
                value: Amount::ZERO,
                script_pubkey: ScriptBuf::new_op_return(wallet::push_bytes(&data)),
            });
        }
        let paid = self.pay_silent_wallet(&inputs, &mut outputs[..recipients.len()])?;
        let tx = self.signed_tx(&inputs, outputs)?;
        let sigops = tx.total_sigop_cost(|op| {
            let coin = inputs.iter().find(|c| c.outpoint == *op)?;
            Some(TxOut {
                value: Amount::from_sat(coin.value),
                script_pubkey: self.owners[coin.owner as usize].script_pubkey.clone(),
            })
        }) as u64;
        let is_silent = |vout: usize| paid.iter().any(|(v, _, _)| *v as usize == vout);
        // A recipient whose output now pays the silent-payment wallet is not paid after all.
        let mut paying = Vec::with_capacity(recipients.len());
        for (vout, owner) in recipients.into_iter().enumerate() {
            match is_silent(vout) {
                true => self.uses[owner as usize] -= 1,
                false => paying.push((vout, owner)),
            }
        }
        let owners: Vec<u32> = inputs
            .iter()
            .map(|c| c.owner)
            .chain(paying.iter().map(|(_, owner)| *owner))
            .collect();
        let wallet = owners.iter().any(|o| self.wallet.contains(o));
        self.wallet_txs += u64::from(wallet);
        let txid = tx.compute_txid();
        for (vout, owner) in paying {
            fresh.push(Coin {
                outpoint: OutPoint::new(txid, vout as u32),
                value: tx.output[vout].value.to_sat(),
                owner,
            });
        }
        Ok(Some(Built {
            tx,
            fee,
            sigops,
            paid,
            owners,
            wallet,
        }))
    }

    /// Takes back what `built` was counted for, when the chain ends before a block had room
    /// for it.
    pub(super) fn forget(&mut self, built: Built) {
        for owner in built.owners {
            self.uses[owner as usize] -= 1;
        }
        self.wallet_txs -= u64::from(built.wallet);
    }

    /// Makes some of `outputs` pay the silent-payment wallet when it draws this transaction.
    fn pay_silent_wallet(
        &mut self,
        inputs: &[Coin],
        outputs: &mut [TxOut],
    ) -> Result<super::silent::Paid, GenerateError> {
        let Some(wallet) = self.silent.as_ref() else {
            return Ok(Vec::new());
        };
        if !wallet.draws(&mut self.rng) {
            return Ok(Vec::new());
        }
        let spent: Vec<(OutPoint, &Owner)> = inputs
            .iter()
            .map(|c| (c.outpoint, &self.owners[c.owner as usize]))
            .collect();
        wallet
            .pay(&mut self.rng, &spent, outputs)
            .map_err(GenerateError::Wallet)
    }

    /// The coins to spend: as many as `shape` has inputs, each of its kind where one is found,
    /// or without a shape one to three (mostly one); `None` when none is left.
    fn take_inputs(&mut self, fresh: &mut Vec<Coin>, shape: Option<&TxShape>) -> Option<Vec<Coin>> {
        let kinds: Vec<Option<ScriptKind>> = match shape {
            Some(shape) => shape.inputs.clone(),
            None => match self.rng.gen_range(0..10) {
                0..=6 => vec![None],
                7..=8 => vec![None; 2],
                _ => vec![None; 3],
            },
        };
        let mut inputs: Vec<Coin> = Vec::with_capacity(kinds.len());
        for kind in kinds {
            match self.take_coin_of(fresh, kind) {
                Some(c) => inputs.push(c),
                None => break,
            }
        }
        if inputs.is_empty() {
            return None;
        }
        for c in &inputs {
            self.uses[c.owner as usize] += 1;
        }
        Some(inputs)
    }

    /// How many outputs, the fee, and whether an OP_RETURN output is added, for `n_in` inputs
    /// worth `total_in` while `pool` coins are spendable (`shaped`: the shape's payment count);
    /// `None` when the inputs cannot pay for one output of at least [`MIN_OUTPUT`].
    fn plan_outputs(
        &mut self,
        n_in: usize,
        total_in: u64,
        pool: usize,
        shaped: Option<usize>,
    ) -> Option<(usize, u64, bool)> {
        // Fan out while there are fewer coins than a block's worth of spends.
        let target = self.opts.txs_per_block as usize * 3;
        let mut n_out = match shaped {
            _ if pool < target => self.rng.gen_range(10..=40),
            Some(payments) => payments.max(1),
            None => match self.rng.gen_range(0..20) {
                0..=2 => 1,
                3..=14 => 2,
                _ => self.rng.gen_range(3..=5),
            },
        };
        let feerate: u64 = self.rng.gen_range(1..=25);
        let with_op_return = self.rng.gen_range(0..20) == 0;
        let vsize_estimate = |n_out: usize| 11 + 100 * n_in as u64 + 43 * n_out as u64;
        let mut fee = feerate * vsize_estimate(n_out);
        while n_out > 1 && total_in < fee + MIN_OUTPUT * n_out as u64 {
            n_out -= 1;
            fee = feerate * vsize_estimate(n_out);
        }
        if total_in < fee + MIN_OUTPUT {
            // Too small for this fee rate: one output at the minimum, the rest is fee. No
            // output is ever below MIN_OUTPUT, so no coin is too small for that.
            if total_in < MIN_OUTPUT {
                return None;
            }
            fee = total_in - MIN_OUTPUT;
        }
        Some((n_out, fee, with_op_return))
    }

    /// `n_out` outputs sharing `spend` at random cuts, each at least [`MIN_OUTPUT`], to
    /// recipients picked as [`ChainGenerator::pick_recipient`] does (new scripts of `kinds[i]`
    /// for the i-th where given); and who they are.
    fn pay_recipients(
        &mut self,
        spend: u64,
        n_out: usize,
        kinds: &[ScriptKind],
    ) -> (Vec<TxOut>, Vec<u32>) {
        let spare = spend - MIN_OUTPUT * n_out as u64;
        let mut cuts: Vec<u64> = (0..n_out.saturating_sub(1))
            .map(|_| self.rng.gen_range(0..=spare))
            .collect();
        cuts.push(0);
        cuts.push(spare);
        cuts.sort_unstable();
        let mut outputs = Vec::with_capacity(n_out + 1);
        let mut recipients = Vec::with_capacity(n_out);
        for w in cuts.windows(2) {
            if recipients.len() == n_out {
                break;
            }
            let owner = self.pick_recipient(kinds.get(recipients.len()).copied());
            self.uses[owner as usize] += 1;
            recipients.push(owner);
            outputs.push(TxOut {
                value: Amount::from_sat(MIN_OUTPUT + (w[1] - w[0])),
                script_pubkey: self.owners[owner as usize].script_pubkey.clone(),
            });
        }
        (outputs, recipients)
    }

    /// A version-2 transaction spending `inputs` (replaceable) into `outputs`, every input
    /// signed by its owner's key.
    fn signed_tx(
        &self,
        inputs: &[Coin],
        outputs: Vec<TxOut>,
    ) -> Result<Transaction, GenerateError> {
        let mut tx = Transaction {
            version: TxVersion::TWO,
            lock_time: LockTime::ZERO,
            input: inputs
                .iter()
                .map(|c| TxIn {
                    previous_output: c.outpoint,
                    script_sig: ScriptBuf::new(),
                    sequence: Sequence::ENABLE_RBF_NO_LOCKTIME,
                    witness: Witness::new(),
                })
                .collect(),
            output: outputs,
        };
        let prevouts: Vec<TxOut> = inputs
            .iter()
            .map(|c| TxOut {
                value: Amount::from_sat(c.value),
                script_pubkey: self.owners[c.owner as usize].script_pubkey.clone(),
            })
            .collect();
        let mut cache = SighashCache::new(&tx);
        let signatures = inputs
            .iter()
            .enumerate()
            .map(|(i, c)| {
                wallet::sign_input(
                    &self.secp,
                    &mut cache,
                    i,
                    &prevouts,
                    &self.owners[c.owner as usize],
                )
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(GenerateError::Sign)?;
        for (input, sig) in tx.input.iter_mut().zip(signatures) {
            input.script_sig = sig.script_sig;
            input.witness = sig.witness;
        }
        Ok(tx)
    }
}
