//! Properties of the policy's parsers of untrusted scripts.

mod script_props;
