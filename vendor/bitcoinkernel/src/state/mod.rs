pub mod chain;
pub mod chainstate;
pub mod context;

pub use chain::{Chain, ChainIterator};
pub use chainstate::{
    ChainstateManager, ChainstateManagerBuilder, ProcessBlockHeaderResult, ProcessBlockResult,
};
pub use context::{ChainParams, ChainType, Context, ContextBuilder};
