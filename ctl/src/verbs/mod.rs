//! One module per verb family.

pub mod backup;
pub mod drain;
pub mod pin;
pub mod purge;
pub mod quorum;
pub mod recover;
pub mod restore;
pub mod status;
pub mod wait;
