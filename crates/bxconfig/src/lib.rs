//! Config loading (filled in by the configs work).
