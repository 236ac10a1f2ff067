//! Core's script errors (script/script_error.h), each with Core's message
//! (`ScriptErrorString`, script/script_error.cpp), so a refusal reads as bitcoind's. Messages
//! are the reference bitcoind's (Knots 29.4); two errors Core split off after 29 keep 29's
//! messages and take the newer names (`script_tests.json` is Core's current file).

/// Why a script failed, named as Core names it (`SCRIPT_ERR_...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[allow(missing_docs)] // each variant is Core's error of the same name; its message says it
pub enum ScriptError {
    #[error("unknown error")]
    UnknownError,
    /// A number over its size or, under MINIMALDATA, not minimal (Core 29 says "unknown
    /// error"; later Core names it `SCRIPTNUM`).
    #[error("unknown error")]
    ScriptNum,
    /// OP_IF or OP_NOTIF run on an empty stack (Core 29's `UNBALANCED_CONDITIONAL`; later
    /// Core's `INVALID_STACK_OPERATION`).
    #[error("Invalid OP_IF construction")]
    IfOnEmptyStack,
    #[error("Script evaluated without error but finished with a false/empty top stack element")]
    EvalFalse,
    #[error("OP_RETURN was encountered")]
    OpReturn,
    #[error("Script is too big")]
    ScriptSize,
    #[error("Push value size limit exceeded")]
    PushSize,
    #[error("Operation limit exceeded")]
    OpCount,
    #[error("Stack size limit exceeded")]
    StackSize,
    #[error("Signature count negative or greater than pubkey count")]
    SigCount,
    #[error("Pubkey count negative or limit exceeded")]
    PubkeyCount,
    #[error("Script failed an OP_VERIFY operation")]
    Verify,
    #[error("Script failed an OP_EQUALVERIFY operation")]
    EqualVerify,
    #[error("Script failed an OP_CHECKMULTISIGVERIFY operation")]
    CheckMultisigVerify,
    #[error("Script failed an OP_CHECKSIGVERIFY operation")]
    CheckSigVerify,
    #[error("Script failed an OP_NUMEQUALVERIFY operation")]
    NumEqualVerify,
    #[error("Opcode missing or not understood")]
    BadOpcode,
    #[error("Attempted to use a disabled opcode")]
    DisabledOpcode,
    #[error("Operation not valid with the current stack size")]
    InvalidStackOperation,
    #[error("Operation not valid with the current altstack size")]
    InvalidAltstackOperation,
    #[error("Invalid OP_IF construction")]
    UnbalancedConditional,
    #[error("Negative locktime")]
    NegativeLocktime,
    #[error("Locktime requirement not satisfied")]
    UnsatisfiedLocktime,
    #[error("Signature hash type missing or not understood")]
    SigHashtype,
    #[error("Non-canonical DER signature")]
    SigDer,
    #[error("Data push larger than necessary")]
    MinimalData,
    #[error("Only push operators allowed in signatures")]
    SigPushOnly,
    #[error("Non-canonical signature: S value is unnecessarily high")]
    SigHighS,
    #[error("Dummy CHECKMULTISIG argument must be zero")]
    SigNullDummy,
    #[error("Public key is neither compressed or uncompressed")]
    PubkeyType,
    #[error("Stack size must be exactly one after execution")]
    CleanStack,
    #[error("OP_IF/NOTIF argument must be minimal")]
    MinimalIf,
    #[error("Signature must be zero for failed CHECK(MULTI)SIG operation")]
    SigNullFail,
    #[error("NOPx reserved for soft-fork upgrades")]
    DiscourageUpgradableNops,
    #[error("Witness version reserved for soft-fork upgrades")]
    DiscourageUpgradableWitnessProgram,
    #[error("Taproot version reserved for soft-fork upgrades")]
    DiscourageUpgradableTaprootVersion,
    #[error("OP_SUCCESSx reserved for soft-fork upgrades")]
    DiscourageOpSuccess,
    #[error("Public key version reserved for soft-fork upgrades")]
    DiscourageUpgradablePubkeyType,
    #[error("Witness program has incorrect length")]
    WitnessProgramWrongLength,
    #[error("Witness program was passed an empty witness")]
    WitnessProgramWitnessEmpty,
    #[error("Witness program hash mismatch")]
    WitnessProgramMismatch,
    #[error("Witness requires empty scriptSig")]
    WitnessMalleated,
    #[error("Witness requires only-redeemscript scriptSig")]
    WitnessMalleatedP2sh,
    #[error("Witness provided for non-witness script")]
    WitnessUnexpected,
    #[error("Using non-compressed keys in segwit")]
    WitnessPubkeyType,
    #[error("Invalid Schnorr signature size")]
    SchnorrSigSize,
    #[error("Invalid Schnorr signature hash type")]
    SchnorrSigHashtype,
    #[error("Invalid Schnorr signature")]
    SchnorrSig,
    #[error("Invalid Taproot control block size")]
    TaprootWrongControlSize,
    #[error("Too much signature validation relative to witness weight")]
    TapscriptValidationWeight,
    #[error("OP_CHECKMULTISIG(VERIFY) is not available in tapscript")]
    TapscriptCheckMultisig,
    #[error("OP_IF/NOTIF argument must be minimal in tapscript")]
    TapscriptMinimalIf,
    #[error("Empty public key in tapscript")]
    TapscriptEmptyPubkey,
    #[error("Using OP_CODESEPARATOR in non-witness script")]
    OpCodeSeparator,
    #[error("Signature is found in scriptCode")]
    SigFindAndDelete,
}

impl ScriptError {
    /// Core's message for this error as a given release words it: Core 31 (`core_31`) names
    /// two errors Core 29 and Knots 29.4 word otherwise (a bad script number, `SCRIPTNUM`; OP_IF
    /// on an empty stack, `INVALID_STACK_OPERATION`); the others read the same.
    pub fn words(self, core_31: bool) -> String {
        match (self, core_31) {
            (ScriptError::ScriptNum, true) => {
                "Script number overflowed or is non-minimally encoded".into()
            }
            (ScriptError::IfOnEmptyStack, true) => {
                "Operation not valid with the current stack size".into()
            }
            _ => self.to_string(),
        }
    }

    /// Core's name for the error without `SCRIPT_ERR_` (as `script_tests.json` writes it).
    pub fn core_name(self) -> &'static str {
        use ScriptError::*;
        match self {
            UnknownError => "UNKNOWN_ERROR",
            ScriptNum => "SCRIPTNUM",
            IfOnEmptyStack => "INVALID_STACK_OPERATION",
            EvalFalse => "EVAL_FALSE",
            OpReturn => "OP_RETURN",
            ScriptSize => "SCRIPT_SIZE",
            PushSize => "PUSH_SIZE",
            OpCount => "OP_COUNT",
            StackSize => "STACK_SIZE",
            SigCount => "SIG_COUNT",
            PubkeyCount => "PUBKEY_COUNT",
            Verify => "VERIFY",
            EqualVerify => "EQUALVERIFY",
            CheckMultisigVerify => "CHECKMULTISIGVERIFY",
            CheckSigVerify => "CHECKSIGVERIFY",
            NumEqualVerify => "NUMEQUALVERIFY",
            BadOpcode => "BAD_OPCODE",
            DisabledOpcode => "DISABLED_OPCODE",
            InvalidStackOperation => "INVALID_STACK_OPERATION",
            InvalidAltstackOperation => "INVALID_ALTSTACK_OPERATION",
            UnbalancedConditional => "UNBALANCED_CONDITIONAL",
            NegativeLocktime => "NEGATIVE_LOCKTIME",
            UnsatisfiedLocktime => "UNSATISFIED_LOCKTIME",
            SigHashtype => "SIG_HASHTYPE",
            SigDer => "SIG_DER",
            MinimalData => "MINIMALDATA",
            SigPushOnly => "SIG_PUSHONLY",
            SigHighS => "SIG_HIGH_S",
            SigNullDummy => "SIG_NULLDUMMY",
            PubkeyType => "PUBKEYTYPE",
            CleanStack => "CLEANSTACK",
            MinimalIf => "MINIMALIF",
            SigNullFail => "NULLFAIL",
            DiscourageUpgradableNops => "DISCOURAGE_UPGRADABLE_NOPS",
            DiscourageUpgradableWitnessProgram => "DISCOURAGE_UPGRADABLE_WITNESS_PROGRAM",
            DiscourageUpgradableTaprootVersion => "DISCOURAGE_UPGRADABLE_TAPROOT_VERSION",
            DiscourageOpSuccess => "DISCOURAGE_OP_SUCCESS",
            DiscourageUpgradablePubkeyType => "DISCOURAGE_UPGRADABLE_PUBKEYTYPE",
            WitnessProgramWrongLength => "WITNESS_PROGRAM_WRONG_LENGTH",
            WitnessProgramWitnessEmpty => "WITNESS_PROGRAM_WITNESS_EMPTY",
            WitnessProgramMismatch => "WITNESS_PROGRAM_MISMATCH",
            WitnessMalleated => "WITNESS_MALLEATED",
            WitnessMalleatedP2sh => "WITNESS_MALLEATED_P2SH",
            WitnessUnexpected => "WITNESS_UNEXPECTED",
            WitnessPubkeyType => "WITNESS_PUBKEYTYPE",
            SchnorrSigSize => "SCHNORR_SIG_SIZE",
            SchnorrSigHashtype => "SCHNORR_SIG_HASHTYPE",
            SchnorrSig => "SCHNORR_SIG",
            TaprootWrongControlSize => "TAPROOT_WRONG_CONTROL_SIZE",
            TapscriptValidationWeight => "TAPSCRIPT_VALIDATION_WEIGHT",
            TapscriptCheckMultisig => "TAPSCRIPT_CHECKMULTISIG",
            TapscriptMinimalIf => "TAPSCRIPT_MINIMALIF",
            TapscriptEmptyPubkey => "TAPSCRIPT_EMPTY_PUBKEY",
            OpCodeSeparator => "OP_CODESEPARATOR",
            SigFindAndDelete => "SIG_FINDANDDELETE",
        }
    }
}
