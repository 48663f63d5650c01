//! filled in by the fakellama work
