//! A store on object storage (`--store s3://bucket/prefix`, or `file:///abs/path` for
//! a local object store): the entries, leases and worker records of cooperating
//! workers on machines that share no filesystem.
//!
//! A remote store is used through a local store, its **mirror**: an entry is looked
//! up in the mirror, and on a miss fetched from the remote (tables downloaded into a
//! staging directory, verified like any local entry, renamed into place). A commit
//! publishes into the mirror and then to the remote: the tables go under a sub-path
//! of their own writer (`<prefix>/<stage>/<key>/<writer>/<table>.parquet`), then the
//! manifest, last, with a create-only write at `<prefix>/<stage>/<key>/manifest.json`
//! naming that writer. So a reader never sees a partial entry, and of two writers of
//! one key exactly one wins; the other takes the winner's entry in place of its own.
//!
//! The blocking helpers run the object store's requests on a small runtime of their
//! own, so they may be called from any thread.

use crate::digest::Digest;
use crate::error::{StoreError, StoreErrorKind};
use crate::manifest::Manifest;
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a write to the remote came to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Put {
    /// Written; the object's new version.
    Done(Version),
    /// Not written: the object exists (a create-only write) or changed since it was
    /// read (a conditional update).
    Lost,
}

/// The version of a remote object, for a conditional update.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Version {
    e_tag: Option<String>,
    version: Option<String>,
}

/// The remote manifest: which writer's sub-path holds the tables, and the manifest.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Published {
    /// The writer's sub-path below `<stage>/<key>/`.
    pub writer: String,
    /// The entry's manifest, as the mirror stores it.
    pub manifest: Manifest,
}

/// An object store and a prefix in it: where a remote store lives.
#[derive(Clone)]
pub struct Remote {
    url: String,
    store: Arc<dyn ObjectStore>,
    prefix: String,
    /// `file://` stores: the directory (leases there use the filesystem's own
    /// atomic operations, which a local object store lacks for updates).
    local: Option<PathBuf>,
    rt: Arc<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote").field("url", &self.url).finish()
    }
}

/// Whether `text` names an object store (`scheme://...`) rather than a directory.
pub fn is_url(text: &str) -> bool {
    text.split_once("://")
        .is_some_and(|(s, _)| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric()))
}

fn unusable(url: &str, why: impl std::fmt::Display) -> StoreError {
    StoreError::new(
        StoreErrorKind::RemoteUnusable(why.to_string()),
        Path::new(url),
    )
}

/// A path segment the remote layout may use: the store's names, or a writer id.
fn is_segment(s: &str) -> bool {
    crate::layout::is_table_name(s)
}

/// The object store of a cloud `scheme` (`s3`, `gs`, `az`) for `bucket` (Azure: the
/// container), configured from that cloud's usual environment variables:
/// - `s3`: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT`
///   (an S3-compatible server), ...; create-only writes with `If-None-Match`,
///   conditional updates by ETag;
/// - `gs`: `GOOGLE_APPLICATION_CREDENTIALS` or `GOOGLE_SERVICE_ACCOUNT`,
///   `GOOGLE_BASE_URL` (an emulator), ...; conditions by object generation;
/// - `az`: `AZURE_STORAGE_ACCOUNT_NAME`, `AZURE_STORAGE_ACCOUNT_KEY` (or a token, a
///   managed identity, ...), `AZURE_STORAGE_USE_EMULATOR` (Azurite); conditions by
///   ETag.
fn cloud(scheme: &str, bucket: &str) -> Result<Arc<dyn ObjectStore>, object_store::Error> {
    Ok(match scheme {
        "s3" => Arc::new(
            object_store::aws::AmazonS3Builder::from_env()
                .with_bucket_name(bucket)
                .with_conditional_put(object_store::aws::S3ConditionalPut::ETagMatch)
                .build()?,
        ),
        "gs" => Arc::new(
            object_store::gcp::GoogleCloudStorageBuilder::from_env()
                .with_bucket_name(bucket)
                .build()?,
        ),
        _ => Arc::new(
            object_store::azure::MicrosoftAzureBuilder::from_env()
                .with_container_name(bucket)
                .build()?,
        ),
    })
}

impl Remote {
    /// Parse `url` and connect: `s3://bucket/prefix`, `gs://bucket/prefix`,
    /// `az://container/prefix` (credentials and endpoints from each cloud's usual
    /// environment variables: `AWS_*`, `GOOGLE_*`, `AZURE_*`) or `file:///abs/path`.
    /// The store is listed once, so an unreachable endpoint, a missing bucket or
    /// refused credentials are an error here, before any work
    /// ([`StoreErrorKind::RemoteUnusable`]).
    pub fn open(url: &str) -> Result<Remote, StoreError> {
        // A cloud's scheme is read before trailing slashes go (`s3://` names no
        // bucket, it is not an unknown scheme `s3:`).
        let given = url;
        let url = url.trim_end_matches('/').to_string();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("otb-remote")
            .enable_all()
            .build()
            .map_err(|e| unusable(&url, e))?;
        let (store, prefix, local): (Arc<dyn ObjectStore>, String, Option<PathBuf>) =
            if let Some((scheme, rest)) = ["s3", "gs", "az"].iter().find_map(|s| {
                let rest = given.strip_prefix(&format!("{s}://"))?;
                Some((*s, rest.trim_end_matches('/')))
            }) {
                let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
                if bucket.is_empty() {
                    let what = if scheme == "az" {
                        "CONTAINER"
                    } else {
                        "BUCKET"
                    };
                    return Err(unusable(
                        &url,
                        format!(
                            "no {}: expected {scheme}://{what}/PREFIX",
                            what.to_lowercase()
                        ),
                    ));
                }
                (
                    cloud(scheme, bucket).map_err(|e| unusable(&url, e))?,
                    prefix.to_string(),
                    None,
                )
            } else if let Some(path) = url.strip_prefix("file://") {
                let dir = PathBuf::from(path);
                if !dir.is_absolute() {
                    return Err(unusable(&url, "expected file:///ABSOLUTE/PATH"));
                }
                std::fs::create_dir_all(&dir).map_err(|e| unusable(&url, e))?;
                let fs = object_store::local::LocalFileSystem::new_with_prefix(&dir)
                    .map_err(|e| unusable(&url, e))?;
                (Arc::new(fs), String::new(), Some(dir))
            } else {
                return Err(unusable(
                    &url,
                    "unsupported object store (use s3://BUCKET/PREFIX, gs://BUCKET/PREFIX, \
                     az://CONTAINER/PREFIX or file:///PATH)",
                ));
            };
        if !prefix.is_empty() && ObjPath::parse(&prefix).is_err() {
            return Err(unusable(
                &url,
                format!("prefix `{prefix}` is not a valid path"),
            ));
        }
        let remote = Remote {
            url: url.clone(),
            store,
            prefix: prefix.trim_matches('/').to_string(),
            local,
            rt: Arc::new(rt),
        };
        let probe = remote.path("")?;
        let store = remote.store.clone();
        remote
            .block(async move {
                let prefix = (!probe.as_ref().is_empty()).then_some(probe);
                store.list_with_delimiter(prefix.as_ref()).await.map(|_| ())
            })
            .map_err(|e| unusable(&url, e))?;
        Ok(remote)
    }

    /// A remote over an object store given directly (tests: an in-memory store).
    pub fn with_store(store: Arc<dyn ObjectStore>, prefix: &str) -> Result<Remote, StoreError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| unusable(prefix, e))?;
        Ok(Remote {
            url: format!("{store}/{prefix}"),
            store,
            prefix: prefix.trim_matches('/').to_string(),
            local: None,
            rt: Arc::new(rt),
        })
    }

    /// The URL it was opened with.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A `file://` store's directory.
    pub(crate) fn local_dir(&self) -> Option<&Path> {
        self.local.as_deref()
    }

    /// Run `fut` on the remote's runtime and wait for it (from any thread, also one
    /// of another runtime).
    fn block<T: Send + 'static>(&self, fut: impl Future<Output = T> + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.rt.spawn(async move {
            let _ = tx.send(fut.await);
        });
        match rx.recv() {
            Ok(v) => v,
            // The task panicked: the runtime's own message says why.
            Err(_) => panic!("a remote store request panicked"),
        }
    }

    fn path(&self, rel: &str) -> Result<ObjPath, StoreError> {
        let full = match (self.prefix.is_empty(), rel.is_empty()) {
            (true, _) => rel.to_string(),
            (false, true) => self.prefix.clone(),
            (false, false) => format!("{}/{rel}", self.prefix),
        };
        ObjPath::parse(&full).map_err(|e| self.err(rel, e))
    }

    fn err(&self, rel: &str, e: impl std::fmt::Display) -> StoreError {
        StoreError::new(
            StoreErrorKind::Remote(e.to_string()),
            Path::new(&format!("{}/{rel}", self.url)),
        )
    }

    /// The object at `rel` (below the prefix) and its version, or `None` when there
    /// is none.
    pub(crate) fn get(&self, rel: &str) -> Result<Option<(Vec<u8>, Version)>, StoreError> {
        let path = self.path(rel)?;
        let store = self.store.clone();
        let got = self.block(async move {
            let r = store.get(&path).await?;
            let v = Version {
                e_tag: r.meta.e_tag.clone(),
                version: r.meta.version.clone(),
            };
            Ok::<_, object_store::Error>((r.bytes().await?.to_vec(), v))
        });
        match got {
            Ok(x) => Ok(Some(x)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.err(rel, e)),
        }
    }

    /// Write `bytes` at `rel`: overwriting, create-only (`None`, `true`) or only over
    /// the version `update`.
    pub(crate) fn put(
        &self,
        rel: &str,
        bytes: Vec<u8>,
        create: bool,
        update: Option<&Version>,
    ) -> Result<Put, StoreError> {
        let path = self.path(rel)?;
        let mode = match (update, create) {
            (Some(v), _) => PutMode::Update(UpdateVersion {
                e_tag: v.e_tag.clone(),
                version: v.version.clone(),
            }),
            (None, true) => PutMode::Create,
            (None, false) => PutMode::Overwrite,
        };
        let store = self.store.clone();
        let put = self.block(async move {
            store
                .put_opts(&path, PutPayload::from(bytes), PutOptions::from(mode))
                .await
        });
        match put {
            Ok(r) => Ok(Put::Done(Version {
                e_tag: r.e_tag,
                version: r.version,
            })),
            Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. }) => Ok(Put::Lost),
            Err(e) => Err(self.err(rel, e)),
        }
    }

    /// The bytes of the object at `rel` (below the prefix), or `None`.
    pub fn get_bytes(&self, rel: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.get(rel)?.map(|(b, _)| b))
    }

    /// Write `bytes` at `rel` unless an object is there (create-only): whether
    /// this wrote it.
    pub fn put_new(&self, rel: &str, bytes: Vec<u8>) -> Result<bool, StoreError> {
        Ok(matches!(self.put(rel, bytes, true, None)?, Put::Done(_)))
    }

    /// The names of the objects directly below the folder `rel` (not below its
    /// sub-folders), sorted.
    pub fn list(&self, rel: &str) -> Result<Vec<String>, StoreError> {
        let path = self.path(rel)?;
        let store = self.store.clone();
        let listed = self.block(async move { store.list_with_delimiter(Some(&path)).await });
        let mut names: Vec<String> = listed
            .map_err(|e| self.err(rel, e))?
            .objects
            .into_iter()
            .filter_map(|o| o.location.filename().map(str::to_owned))
            .collect();
        names.sort();
        Ok(names)
    }

    /// Remove the object at `rel` (nothing when there is none).
    pub(crate) fn delete(&self, rel: &str) -> Result<(), StoreError> {
        let path = self.path(rel)?;
        let store = self.store.clone();
        match self.block(async move { store.delete(&path).await }) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.err(rel, e)),
        }
    }

    /// Check the remote's `FORMAT` object, writing it (create-only) when there is
    /// none: a prefix holding another store format is refused.
    pub(crate) fn check_format(&self, write: bool) -> Result<(), StoreError> {
        let want = format!("{}\n", crate::layout::STORE_FORMAT);
        let found = match self.get("FORMAT")? {
            Some((b, _)) => b,
            None if write => {
                if let Put::Done(_) = self.put("FORMAT", want.clone().into_bytes(), true, None)? {
                    return Ok(());
                }
                self.get("FORMAT")?.map(|(b, _)| b).unwrap_or_default()
            }
            None => return Ok(()),
        };
        let found = String::from_utf8_lossy(&found).trim().to_string();
        if found == crate::layout::STORE_FORMAT {
            return Ok(());
        }
        Err(StoreError::new(
            StoreErrorKind::Format {
                found,
                expected: crate::layout::STORE_FORMAT.to_string(),
            },
            Path::new(&format!("{}/FORMAT", self.url)),
        ))
    }

    fn manifest_rel(stage: &str, key: &Digest) -> String {
        format!("{stage}/{}/manifest.json", key.0)
    }

    /// The published entry of `stage`/`key`, if the remote has one (its manifest
    /// exists). `Err(reason)` inside: a remote manifest that cannot be used.
    pub(crate) fn published(
        &self,
        stage: &str,
        key: &Digest,
    ) -> Result<Option<Result<Published, String>>, StoreError> {
        let Some((bytes, _)) = self.get(&Self::manifest_rel(stage, key))? else {
            return Ok(None);
        };
        let p: Published = match serde_json::from_slice(&bytes) {
            Ok(p) => p,
            Err(e) => return Ok(Some(Err(format!("remote manifest invalid: {e}")))),
        };
        if !is_segment(&p.writer) {
            return Ok(Some(Err(format!(
                "remote manifest names writer `{}`, not a path the store writes",
                p.writer
            ))));
        }
        if &p.manifest.key != key || p.manifest.components.stage != stage {
            return Ok(Some(Err(
                "remote manifest key does not match its path".into()
            )));
        }
        for (name, t) in &p.manifest.outputs {
            if !crate::layout::is_table_name(name) || t.file != crate::layout::table_file(name) {
                return Ok(Some(Err(format!(
                    "remote table `{name}` is recorded in file `{}`",
                    t.file
                ))));
            }
        }
        Ok(Some(Ok(p)))
    }

    /// Download the tables of `p` into `dir` and write its manifest there (the
    /// caller verifies the directory before it is used).
    pub(crate) fn download(&self, p: &Published, dir: &Path) -> Result<(), StoreError> {
        let m = &p.manifest;
        for t in m.outputs.values() {
            let rel = format!("{}/{}/{}/{}", m.components.stage, m.key.0, p.writer, t.file);
            let Some((bytes, _)) = self.get(&rel)? else {
                return Err(self.err(&rel, "table of a published entry is missing"));
            };
            crate::fsio::write_atomic(&dir.join(&t.file), &bytes)?;
        }
        let json = serde_json::to_vec_pretty(m)
            .map_err(|e| StoreError::new(StoreErrorKind::Manifest(e.to_string()), dir))?;
        crate::fsio::write_atomic(&dir.join("manifest.json"), &json)
    }

    /// Publish the verified local entry in `dir`: its tables under a sub-path of
    /// this writer, then its manifest, create-only. `Ok(None)`: published;
    /// `Ok(Some(theirs))`: another writer's manifest was there first.
    pub(crate) fn publish(
        &self,
        dir: &Path,
        m: &Manifest,
    ) -> Result<Option<Result<Published, String>>, StoreError> {
        let stage = &m.components.stage;
        if let Some(theirs) = self.published(stage, &m.key)? {
            return Ok(Some(theirs));
        }
        let writer = writer_id();
        for t in m.outputs.values() {
            let bytes = std::fs::read(dir.join(&t.file)).map_err(|e| StoreError::io(dir, e))?;
            let rel = format!("{stage}/{}/{writer}/{}", m.key.0, t.file);
            self.put(&rel, bytes, false, None)?;
        }
        let json = serde_json::to_vec_pretty(&Published {
            writer: writer.clone(),
            manifest: m.clone(),
        })
        .map_err(|e| StoreError::new(StoreErrorKind::Manifest(e.to_string()), dir))?;
        match self.put(&Self::manifest_rel(stage, &m.key), json, true, None)? {
            Put::Done(_) => Ok(None),
            Put::Lost => {
                // Another writer won: its tables stay, ours are dropped.
                for t in m.outputs.values() {
                    let _ = self.delete(&format!("{stage}/{}/{writer}/{}", m.key.0, t.file));
                }
                Ok(Some(self.published(stage, &m.key)?.unwrap_or_else(|| {
                    Err("remote manifest vanished after a lost publish".into())
                })))
            }
        }
    }
}

/// This machine's host name (for lease holders and writer ids).
pub(crate) fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

/// A name unique to this writer and publish: host, process and time.
fn writer_id() -> String {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let host: String = host()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("w{host}-{}-{nanos}-{seq}", std::process::id())
}

/// The local mirror of the remote store at `url`: `$OTB_STORE_CACHE/<hash of the
/// URL>`, by default under `~/.cache/opaquetools/stores/`.
pub fn mirror_dir(url: &str) -> Result<PathBuf, StoreError> {
    let base = match std::env::var_os("OTB_STORE_CACHE") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => match std::env::var_os("HOME") {
            Some(h) if !h.is_empty() => PathBuf::from(h)
                .join(".cache")
                .join("opaquetools")
                .join("stores"),
            _ => {
                return Err(unusable(
                    url,
                    "no directory for its local mirror: set OTB_STORE_CACHE (or HOME)",
                ))
            }
        },
    };
    let url = url.trim_end_matches('/');
    Ok(base.join(&Digest::of_bytes(url.as_bytes()).0[..24]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory() -> Remote {
        Remote::with_store(Arc::new(object_store::memory::InMemory::new()), "p/q").unwrap()
    }

    #[test]
    fn create_only_and_conditional_writes_have_one_winner() {
        let r = memory();
        assert!(matches!(
            r.put("a", b"1".to_vec(), true, None).unwrap(),
            Put::Done(_)
        ));
        assert_eq!(r.put("a", b"2".to_vec(), true, None).unwrap(), Put::Lost);
        let (bytes, v) = r.get("a").unwrap().unwrap();
        assert_eq!(bytes, b"1");
        assert!(matches!(
            r.put("a", b"3".to_vec(), false, Some(&v)).unwrap(),
            Put::Done(_)
        ));
        // The version read before is stale now: a second taker loses.
        assert_eq!(
            r.put("a", b"4".to_vec(), false, Some(&v)).unwrap(),
            Put::Lost
        );
        assert_eq!(r.get("a").unwrap().unwrap().0, b"3");
        r.delete("a").unwrap();
        assert!(r.get("a").unwrap().is_none());
        r.delete("a").unwrap();
    }

    #[test]
    fn urls_are_told_from_paths_and_bad_ones_refused() {
        assert!(is_url("s3://b/p"));
        assert!(is_url("file:///tmp/x"));
        assert!(!is_url("outputs/store"));
        assert!(!is_url("/a/b://c"));
        for bad in [
            "s3://",
            "gs://",
            "az:///p",
            "ftp://b/p",
            "file://relative/path",
        ] {
            let e = Remote::open(bad).unwrap_err();
            assert!(
                matches!(e.kind, StoreErrorKind::RemoteUnusable(_)),
                "{bad}: {e:?}"
            );
        }
        // A known scheme without a bucket says what is missing.
        for (bad, says) in [
            ("s3://", "expected s3://BUCKET/PREFIX"),
            ("gs://", "expected gs://BUCKET/PREFIX"),
            ("az://", "expected az://CONTAINER/PREFIX"),
            ("az:///p", "expected az://CONTAINER/PREFIX"),
        ] {
            let e = Remote::open(bad).unwrap_err();
            assert!(format!("{e}").contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn a_file_store_checks_its_format() {
        let d = tempfile::tempdir().unwrap();
        let url = format!("file://{}", d.path().display());
        let r = Remote::open(&url).unwrap();
        r.check_format(true).unwrap();
        assert!(d.path().join("FORMAT").is_file());
        std::fs::write(d.path().join("FORMAT"), "otb-store-0\n").unwrap();
        assert!(matches!(
            r.check_format(true).unwrap_err().kind,
            StoreErrorKind::Format { .. }
        ));
    }
}
