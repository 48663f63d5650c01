//! filled in by the configs work
