//! loopd's configuration (filled in by the configs work).
