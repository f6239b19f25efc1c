//! Files a user names (experiment files, price files, positions, corpora, id lists),
//! checked by type and size before they are read: a device (`/dev/zero`), a FIFO or a
//! folder is refused at once, and a file larger than its kind's limit is refused
//! instead of being read into memory.

use std::io::Read;
use std::path::Path;

/// Limit for small text files a person writes (experiment files, price files,
/// prompt templates, id lists): 16 MiB.
pub const SMALL_TEXT: u64 = 16 << 20;

/// Limit for data files (positions, BFCL questions, corpora): 64 GiB, i.e. the
/// type check alone in practice.
pub const DATA: u64 = 64 << 30;

/// `path` is a regular file (after links) of at most `max` bytes: its size, or an
/// `InvalidInput` error saying what it is instead.
pub fn check(path: &Path, max: u64) -> std::io::Result<u64> {
    let meta = std::fs::metadata(path)?;
    if meta.is_dir() {
        return Err(invalid("is a folder, not a file".into()));
    }
    if !meta.is_file() {
        return Err(invalid(
            "is not a regular file (a device, pipe or socket); name a file".into(),
        ));
    }
    if meta.len() > max {
        return Err(invalid(format!(
            "{} bytes, more than the {max} bytes such a file may have",
            meta.len()
        )));
    }
    Ok(meta.len())
}

/// The text of `path` after [`check`]; at most `max` bytes are read even if the file
/// grows meanwhile.
pub fn read_text(path: &Path, max: u64) -> std::io::Result<String> {
    let bytes = read(path, max)?;
    String::from_utf8(bytes).map_err(|_| invalid("is not UTF-8 text".into()))
}

/// The bytes of `path` after [`check`]; at most `max` bytes are read even if the
/// file grows meanwhile.
pub fn read(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let len = check(path, max)?;
    let mut out = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    std::fs::File::open(path)?
        .take(max.saturating_add(1))
        .read_to_end(&mut out)?;
    if out.len() as u64 > max {
        return Err(invalid(format!(
            "grew past the {max} bytes such a file may have"
        )));
    }
    Ok(out)
}

fn invalid(why: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_folders_and_large_files_are_refused_before_reading() {
        let e = read_text(Path::new("/dev/zero"), SMALL_TEXT).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let dir = std::env::temp_dir().join(format!("otb-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = read_text(&dir, SMALL_TEXT).unwrap_err();
        assert!(e.to_string().contains("is a folder"), "{e}");
        let f = dir.join("big.toml");
        std::fs::write(&f, "x".repeat(100)).unwrap();
        let e = read_text(&f, 10).unwrap_err();
        assert!(e.to_string().contains("100 bytes, more than the 10"), "{e}");
        assert_eq!(read_text(&f, 100).unwrap().len(), 100);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
