//! The engine's tests: background work after a turn, and faults (a model or a log that fails).

mod background_work;
mod faults;
