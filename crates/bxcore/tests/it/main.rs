//! bxcore's integration tests, one binary (issue 14): one module per concept.

mod ids;
mod labels;
mod records;
mod sanitize;
