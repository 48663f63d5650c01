//! boxd, boxmaker's supervisor.
//!
//! It will start llama-server, brokerd and loopd in order with pinned configs, watch and
//! restart them, and stop them in reverse order (issue #8). Today it holds its configuration:
//! [`config`].

pub mod config;
