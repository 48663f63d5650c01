//! Tests of the KV files with fakellama in-process.
