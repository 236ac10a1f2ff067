pub mod notification;
pub mod types;
pub mod validation;

pub use types::{
    BlockValidationResult, BlockValidationStateExt, BlockValidationStateRef, SynchronizationState,
    ValidationMode, Warning,
};

pub use notification::{
    BlockTipCallback, FatalErrorCallback, FlushErrorCallback, HeaderTipCallback,
    NotificationCallbackRegistry, ProgressCallback, WarningSetCallback, WarningUnsetCallback,
};

pub use validation::{BlockCheckedCallback, ValidationCallbackRegistry};
