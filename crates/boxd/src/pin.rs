//! Pinned config files: a child starts only if its config file has the sha256 boxd's config
//! gives for it.

use crate::config::Child;
use crate::error::Error;
use sha2::{Digest, Sha256};

/// Checks `child`'s config file against its pinned sha256 (nothing to check when it has
/// none). The digest comparison ignores hex case.
pub fn verify(child: &Child) -> Result<(), Error> {
    let (Some(file), Some(expected)) = (&child.config_file, &child.config_sha256) else {
        return Ok(());
    };
    let bytes = std::fs::read(file).map_err(|source| Error::PinRead {
        name: child.name.clone(),
        file: file.clone(),
        source,
    })?;
    let actual = hex::encode(Sha256::digest(&bytes));
    if actual.eq_ignore_ascii_case(expected) {
        Ok(())
    } else {
        Err(Error::PinMismatch {
            name: child.name.clone(),
            file: file.clone(),
            expected: expected.clone(),
            actual,
        })
    }
}
