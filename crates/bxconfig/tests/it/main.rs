//! bxconfig's integration tests, one binary (issue 14).

mod load;
