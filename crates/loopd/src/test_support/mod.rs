//! What loopd's unit tests share: fakellama in-process with a client for it (`llama`), and a
//! bed of fakellama, a store and the shipped prompt files for the compaction and tool-summary
//! tests (`compact`).

pub(crate) mod compact;
pub(crate) mod llama;
