//! The engine's tests: background work after a turn, faults (a model or a log that fails),
//! and turns that wait for the owner's approval.

mod approvals;
mod background_work;
mod faults;
