//! The files the kernel itself opens with exec rights when it executes a program: the
//! program, then for a script its `#!` interpreter, and for a dynamically linked ELF file its
//! loader (`PT_INTERP`, such as `/lib64/ld-linux-x86-64.so.2`). Under `ExecRule::ProgramOnly`
//! these, and only these, get Landlock's `Execute` right: the kernel opens the loader with
//! exec rights as part of the one `execve`, so without the right the program could not start.
//!
//! The loader having `Execute` does not make it a way around: the seccomp filter (`execwall`)
//! refuses every `execve` after the shim's own, so nothing can execute the loader (or the
//! interpreter) by itself; the right only lets the kernel load it for the program.

use object::read::elf::{FileHeader, ProgramHeader};
use object::{FileKind, ReadCache, elf};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// How many `#!` interpreters deep the kernel follows (`BINPRM_MAX_RECURSION` is 4).
pub const MAX_SCRIPT_DEPTH: usize = 4;
/// How much of a script the kernel reads for its `#!` line (`BINPRM_BUF_SIZE`, bytes).
const SHEBANG_BYTES: usize = 256;

/// The program and the files the kernel opens to execute it (interpreters and loaders), in
/// that order. A file that cannot be read or parsed adds nothing: the kernel will then refuse
/// it, or it needs nothing more.
pub fn exec_files(program: &Path) -> Vec<PathBuf> {
    let mut files = vec![program.to_owned()];
    let mut current = program.to_owned();
    for _ in 0..=MAX_SCRIPT_DEPTH {
        match next_file(&current) {
            Some(next) if !files.contains(&next) => {
                files.push(next.clone());
                current = next;
            }
            _ => break,
        }
    }
    files
}

/// The file the kernel opens next to execute `path`: its `#!` interpreter or ELF loader.
fn next_file(path: &Path) -> Option<PathBuf> {
    let mut head = Vec::with_capacity(SHEBANG_BYTES);
    File::open(path)
        .ok()?
        .take(SHEBANG_BYTES as u64)
        .read_to_end(&mut head)
        .ok()?;
    if let Some(line) = head.strip_prefix(b"#!") {
        return shebang_interpreter(line);
    }
    elf_interpreter(path)
}

/// The interpreter of a `#!` line (its first word; relative ones are left out).
fn shebang_interpreter(line: &[u8]) -> Option<PathBuf> {
    let line = line.split(|&b| b == b'\n').next()?;
    let word = line
        .split(|&b| b == b' ' || b == b'\t')
        .find(|w| !w.is_empty())?;
    let word = std::str::from_utf8(word).ok()?;
    word.starts_with('/').then(|| PathBuf::from(word))
}

/// The `PT_INTERP` path of an ELF file, when it has one.
fn elf_interpreter(path: &Path) -> Option<PathBuf> {
    let file = File::open(path).ok()?;
    let cache = ReadCache::new(file);
    let interp = match FileKind::parse(&cache).ok()? {
        FileKind::Elf32 => interpreter::<elf::FileHeader32<object::Endianness>>(&cache),
        FileKind::Elf64 => interpreter::<elf::FileHeader64<object::Endianness>>(&cache),
        _ => None,
    }?;
    let interp = std::str::from_utf8(&interp).ok()?;
    interp.starts_with('/').then(|| PathBuf::from(interp))
}

fn interpreter<H: FileHeader<Endian = object::Endianness>>(
    data: &ReadCache<File>,
) -> Option<Vec<u8>> {
    let header = H::parse(data).ok()?;
    let endian = header.endian().ok()?;
    header
        .program_headers(endian, data)
        .ok()?
        .iter()
        .find_map(|ph| ph.interpreter(endian, data).ok().flatten())
        .map(<[u8]>::to_vec)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_dynamic_program_needs_its_loader() {
        let sort = crate::program::resolve("sort").unwrap();
        let files = exec_files(&sort);
        assert_eq!(files[0], sort);
        assert_eq!(files.len(), 2, "{files:?}");
        let loader = files[1].to_str().unwrap();
        assert!(loader.contains("ld"), "{files:?}");
    }

    #[test]
    fn a_script_needs_its_interpreter_and_the_interpreters_loader() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("s");
        std::fs::write(&script, "#!  /bin/sh -e\necho hi\n").unwrap();
        let files = exec_files(&script);
        assert_eq!(files[1], PathBuf::from("/bin/sh"), "{files:?}");
        assert_eq!(files.len(), 3, "{files:?}");
    }

    #[test]
    fn a_file_that_is_neither_needs_nothing_more() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("d");
        std::fs::write(&data, "just text").unwrap();
        assert_eq!(exec_files(&data), vec![data]);
        assert_eq!(shebang_interpreter(b"relative/sh\n"), None);
    }
}
