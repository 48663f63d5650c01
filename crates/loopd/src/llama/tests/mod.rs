//! The llama client's tests, against fakellama in-process (`support`, which every loopd test
//! that needs a model shares).
#![cfg(test)]

mod client;
mod errors;
mod faults;
mod kept;
mod quiet;
mod ready;
pub(crate) mod support;
mod tls;
#[cfg(test)]
pub(crate) mod tls_proxy;
