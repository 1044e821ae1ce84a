//! Object storage through `object_store`: one code path for `file://`, `memory://`,
//! `s3://`, `gs://` and `az://` (configured by URL and the usual environment
//! variables). Objects are only ever created, never overwritten, so replicas sharing a
//! bucket need no coordination beyond `PutMode::Create`.
//!
//! A 2xx means the store acknowledged the write: for S3-compatible stores that is
//! their own durability; for `file://` the object, its folder and every folder whose
//! own entry is not yet known to be durable (up to the store's root) are fsynced first,
//! so an acknowledged write survives a power loss, and so does a delete. file:// creates
//! and reads are done here, in one blocking task each, in LocalFileSystem's layout;
//! listings and deletes go through LocalFileSystem.
//!
//! Every operation is bounded by the store timeout: a store that is down fails fast
//! (few retries) and one that hangs fails when the timeout passes, so a request never
//! waits on storage for longer than that.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::io::ErrorKind;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, ObjectStoreScheme, PutMode, PutOptions, PutPayload, RetryConfig};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("invalid --store URL '{url}': {reason}")]
    BadUrl { url: String, reason: String },
    #[error("object storage: {0}")]
    Backend(#[from] object_store::Error),
    #[error("object storage: {0}")]
    Sync(#[from] std::io::Error),
    #[error("object storage is too contended: {0}")]
    Contention(String),
    #[error("object storage did not answer within {} s", .0.as_secs_f64())]
    Timeout(Duration),
}

#[derive(Clone, Debug)]
pub struct Store {
    inner: Arc<dyn ObjectStore>,
    /// The URL's path inside the store (a folder for file://, a prefix in a bucket).
    root: Path,
    /// What the store is, for logs.
    pub description: String,
    /// For `file://` stores: their folder, written and synced here.
    local: Option<Arc<LocalSync>>,
    /// Longest any one operation may take.
    timeout: Duration,
}

/// A cloud store's builder from the URL and options, retrying within `retry`.
macro_rules! cloud {
    ($builder:ty, $url:expr, $options:expr, $retry:expr) => {{
        let builder =
            $options.fold(<$builder>::new().with_url($url.to_string()), |builder, (key, value)| match key.parse() {
                Ok(k) => builder.with_config(k, value),
                Err(_) => builder,
            });
        Arc::new(builder.with_retry($retry).build()?) as Arc<dyn ObjectStore>
    }};
}

/// The store behind `url`: object_store's own, except that retries stop within
/// `timeout` (its default retries for three minutes, far past any request's patience).
fn open_backend(url: &url::Url, timeout: Duration) -> Result<(Arc<dyn ObjectStore>, Path), object_store::Error> {
    let (scheme, path) = ObjectStoreScheme::parse(url)?;
    // Each cloud builder reads its own settings (AWS_*, GOOGLE_*, AZURE_*), e.g.
    // AWS_ENDPOINT and AWS_ALLOW_HTTP for an S3-compatible server.
    let options = std::env::vars().filter_map(|(k, v)| {
        let k = k.to_ascii_lowercase();
        (k.starts_with("aws_") || k.starts_with("google_") || k.starts_with("azure_")).then_some((k, v))
    });
    let retry = RetryConfig { max_retries: 3, retry_timeout: timeout, ..RetryConfig::default() };
    let inner = match scheme {
        ObjectStoreScheme::AmazonS3 => cloud!(object_store::aws::AmazonS3Builder, url, options, retry),
        ObjectStoreScheme::GoogleCloudStorage => {
            cloud!(object_store::gcp::GoogleCloudStorageBuilder, url, options, retry)
        }
        ObjectStoreScheme::MicrosoftAzure => cloud!(object_store::azure::MicrosoftAzureBuilder, url, options, retry),
        _ => return object_store::parse_url(url).map(|(store, root)| (Arc::from(store), root)),
    };
    Ok((inner, Path::parse(path)?))
}

impl Store {
    /// Opens `url`; a plain path (like the default `./data`) means a local folder.
    /// No operation takes longer than `timeout`.
    pub fn open(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        let bad = |reason: String| StoreError::BadUrl { url: url.to_owned(), reason };
        let parsed = match url::Url::parse(url) {
            Ok(u) if u.scheme().len() > 1 => u,
            _ => {
                std::fs::create_dir_all(url).map_err(|e| bad(e.to_string()))?;
                let dir = std::fs::canonicalize(url).map_err(|e| bad(e.to_string()))?;
                url::Url::from_directory_path(&dir).map_err(|()| bad("not an absolute folder".into()))?
            }
        };
        let mut local = None;
        if parsed.scheme() == "file" {
            let dir = parsed.to_file_path().map_err(|()| bad("not a local path".into()))?;
            std::fs::create_dir_all(&dir).map_err(|e| bad(e.to_string()))?;
            local = Some(Arc::new(LocalSync { root: dir, ..LocalSync::default() }));
        }
        let (inner, root) = open_backend(&parsed, timeout).map_err(|e| bad(e.to_string()))?;
        Ok(Store { inner, root, description: parsed.to_string(), local, timeout })
    }

    /// `operation`, or a timeout error once the store timeout has passed.
    async fn bounded<T>(&self, operation: impl Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
        tokio::time::timeout(self.timeout, operation).await.unwrap_or(Err(StoreError::Timeout(self.timeout)))
    }

    /// fsync calls made so far.
    #[cfg(test)]
    pub fn syncs(&self) -> u64 {
        self.local.as_ref().map_or(0, |l| l.syncs.load(Ordering::Relaxed))
    }

    /// For `file://`: where `key` lives on disk. A file:// store is object_store's
    /// LocalFileSystem at `/`, and keys carry the folder.
    fn local_path(&self, key: &str) -> Option<(std::path::PathBuf, Arc<LocalSync>)> {
        let local = self.local.clone()?;
        Some((std::path::Path::new("/").join(self.path(key).as_ref()), local))
    }

    /// For `file://`: syncs the object (if it exists) and its folder, then each folder
    /// above whose entry this process has not synced yet, up to the store's root.
    async fn sync(&self, key: &str) -> Result<(), StoreError> {
        let Some((path, local)) = self.local_path(key) else { return Ok(()) };
        blocking(move || {
            if path.is_file() {
                local.sync(&path)?;
            }
            local.sync_folders(&path)
        })
        .await
    }

    fn path(&self, key: &str) -> Path {
        self.root.parts().chain(Path::from(key).parts()).collect()
    }

    /// Creates `key` unless it exists; true when this call created it. Returns after
    /// the store acknowledged the write.
    pub async fn create(&self, key: &str, bytes: Bytes) -> Result<bool, StoreError> {
        if let Some((path, local)) = self.local_path(key) {
            return self.bounded(blocking(move || local.create(&path, &bytes))).await;
        }
        let options = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
        self.bounded(async {
            match self.inner.put_opts(&self.path(key), PutPayload::from(bytes), options).await {
                Ok(_) => {
                    self.sync(key).await?;
                    Ok(true)
                }
                Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
                Err(e) => Err(e.into()),
            }
        })
        .await
    }

    /// Creates `key` holding `bytes`, which are the contents of the stored object `of`,
    /// unless `key` exists; true when this call created it. On file:// it is a hard link
    /// to `of` (no new file and no data written, only folders synced); elsewhere, a write
    /// of `bytes`. Objects are never changed in place, so the two names stay alike.
    pub async fn create_copy(&self, key: &str, bytes: Bytes, of: &str) -> Result<bool, StoreError> {
        match (self.local_path(key), self.local_path(of)) {
            (Some((path, local)), Some((original, _))) => {
                self.bounded(blocking(move || local.link(&original, &path, &bytes))).await
            }
            _ => self.create(key, bytes).await,
        }
    }

    pub async fn get(&self, key: &str) -> Result<Option<Bytes>, StoreError> {
        if let Some((path, _)) = self.local_path(key) {
            // One read in one blocking task (LocalFileSystem takes two).
            return self
                .bounded(blocking(move || match std::fs::read(&path) {
                    Ok(bytes) => Ok(Some(Bytes::from(bytes))),
                    Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::IsADirectory) => Ok(None),
                    Err(e) => Err(e),
                }))
                .await;
        }
        self.bounded(async {
            match self.inner.get(&self.path(key)).await {
                Ok(r) => Ok(Some(r.bytes().await?)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e.into()),
            }
        })
        .await
    }

    pub async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.bounded(async {
            match self.inner.delete(&self.path(key)).await {
                Ok(()) => self.sync(key).await,
                Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(e.into()),
            }
        })
        .await
    }

    /// Keys under `prefix` (relative to it), in ascending order, after `offset` if given.
    pub async fn list(&self, prefix: &str, offset: Option<&str>) -> Result<Vec<String>, StoreError> {
        let mut keys = Vec::new();
        self.scan(prefix, offset, |key| {
            keys.push(key);
            true
        })
        .await?;
        Ok(keys)
    }

    /// Keys under `prefix` (relative to it) after `offset`, handed to `visit` in ascending
    /// order until it returns false. Stores that list in order (S3, GCS, Azure, memory)
    /// stop fetching pages there. A local folder has no order: each folder's names are
    /// read whole (without a stat per file, unlike LocalFileSystem) and sorted, and its
    /// subfolders are walked in order, those wholly before `offset` skipped, so a scan
    /// reads the folders it reaches.
    pub async fn scan(
        &self,
        prefix: &str,
        offset: Option<&str>,
        mut visit: impl FnMut(String) -> bool + Send,
    ) -> Result<(), StoreError> {
        if let Some((root, _)) = self.local_path(prefix) {
            return self
                .bounded(async {
                    // Each open folder's key and its entries not yet visited, last first.
                    let mut open = vec![(String::new(), blocking_entries(root.clone()).await?)];
                    while let Some((folder, entries)) = open.last_mut() {
                        let Some((name, is_folder)) = entries.pop() else {
                            open.pop();
                            continue;
                        };
                        let key = if folder.is_empty() { name } else { format!("{folder}/{name}") };
                        if is_folder {
                            // Keys in it start with "key/", and '\x7f' sorts after any of theirs.
                            if offset.is_none_or(|o| o < format!("{key}/\x7f").as_str()) {
                                let entries = blocking_entries(root.join(&key)).await?;
                                open.push((key, entries));
                            }
                        } else if !staged(&key) && offset.is_none_or(|o| key.as_str() > o) && !visit(key) {
                            break;
                        }
                    }
                    Ok(())
                })
                .await;
        }
        let base = self.path(prefix);
        let mut stream = match offset {
            Some(o) => self.inner.list_with_offset(Some(&base), &self.path(&format!("{prefix}/{o}"))),
            None => self.inner.list(Some(&base)),
        };
        self.bounded(async {
            while let Some(meta) = stream.try_next().await? {
                let Some(rest) = meta.location.prefix_match(&base) else { continue };
                if !visit(rest.map(|p| p.as_ref().to_owned()).collect::<Vec<_>>().join("/")) {
                    break;
                }
            }
            Ok(())
        })
        .await
    }

    /// The folders directly under `prefix` (their names), in ascending order: one
    /// listing of one level, whatever lies deeper.
    pub async fn list_folders(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        Ok(self.list_level(prefix).await?.folders)
    }

    /// The folders and the objects directly under `prefix` (their names), each in
    /// ascending order: one listing of one level.
    pub async fn list_level(&self, prefix: &str) -> Result<Level, StoreError> {
        let base = self.path(prefix);
        let listed = self.bounded(async { Ok(self.inner.list_with_delimiter(Some(&base)).await?) }).await?;
        let names = |paths: Vec<Path>| {
            let mut names: Vec<String> = paths.iter().filter_map(|p| p.filename().map(str::to_owned)).collect();
            names.sort_unstable();
            names
        };
        Ok(Level {
            folders: names(listed.common_prefixes),
            objects: names(listed.objects.into_iter().map(|meta| meta.location).collect()),
        })
    }
}

/// One level of a folder: its subfolders and its own objects.
pub struct Level {
    pub folders: Vec<String>,
    pub objects: Vec<String>,
}

/// Whether a local file is a write in progress (`name#digits`, LocalFileSystem's layout).
fn staged(name: &str) -> bool {
    name.rsplit('/')
        .next()
        .and_then(|n| n.split_once('#'))
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A local folder's entries (name, whether a folder), in descending key order: a
/// folder's keys continue its name with '/', so it sorts as `name/`. Empty when it is gone.
async fn blocking_entries(folder: PathBuf) -> Result<Vec<(String, bool)>, StoreError> {
    blocking(move || {
        let entries = match std::fs::read_dir(&folder) {
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            entries => entries?,
        };
        let mut named = Vec::new();
        for entry in entries {
            let entry = entry?;
            if let Some(name) = entry.file_name().to_str() {
                named.push((name.to_owned(), entry.file_type()?.is_dir()));
            }
        }
        fn sort_key((name, is_folder): &(String, bool)) -> impl Iterator<Item = u8> + '_ {
            name.bytes().chain(is_folder.then_some(b'/'))
        }
        named.sort_unstable_by(|a, b| sort_key(b).cmp(sort_key(a)));
        Ok(named)
    })
    .await
}

/// `work` on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| StoreError::Sync(std::io::Error::other(e)))?
        .map_err(StoreError::Sync)
}

/// Durable writes to a `file://` store, with the same layout as object_store's
/// LocalFileSystem (which lists past its staging names, `name#digits`), in one blocking
/// task per write instead of a put and then a sync.
#[derive(Debug, Default)]
struct LocalSync {
    root: std::path::PathBuf,
    /// fsync calls made (files and folders), for tests.
    syncs: AtomicU64,
    /// Folders whose entry in their parent this process has synced: a new object in
    /// one needs only its own folder synced, not every folder up to the root.
    durable: Mutex<HashSet<PathBuf>>,
    /// Each folder's shared syncs.
    folders: Mutex<HashMap<PathBuf, Arc<FolderSync>>>,
}

/// One folder's syncs, shared by concurrent writes (group commit): a write waits for
/// a sync of its folder that started after its change, and one sync serves every
/// change made before it started.
#[derive(Debug, Default)]
struct FolderSync {
    state: Mutex<FolderSyncState>,
    finished: Condvar,
}

#[derive(Debug, Default)]
struct FolderSyncState {
    /// Changes that asked for a sync, numbered 1, 2, …
    requested: u64,
    /// Every change up to this one is durable.
    synced: u64,
    running: bool,
}

impl FolderSync {
    /// Returns once a sync that started after this call's change has succeeded.
    fn sync(&self, fsync: impl Fn() -> std::io::Result<()>) -> std::io::Result<()> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.requested += 1;
        let mine = state.requested;
        while state.synced < mine {
            if state.running {
                state = self.finished.wait(state).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            state.running = true;
            let covers = state.requested;
            drop(state);
            let result = fsync();
            state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state.running = false;
            if result.is_ok() {
                state.synced = covers;
            }
            self.finished.notify_all();
            // A failed sync fails its caller; those waiting try again themselves.
            result?;
        }
        Ok(())
    }
}

impl LocalSync {
    /// Past this many known folders, the sets start again (costing only a few extra syncs).
    const MAX_KNOWN: usize = 100_000;

    fn sync(&self, path: &std::path::Path) -> std::io::Result<()> {
        std::fs::File::open(path)?.sync_all()?;
        self.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Syncs folder `dir`, sharing the sync with concurrent writes to it.
    fn sync_folder(&self, dir: &std::path::Path) -> std::io::Result<()> {
        let folder = {
            let mut folders = self.folders.lock().unwrap_or_else(|e| e.into_inner());
            if folders.len() >= Self::MAX_KNOWN {
                folders.retain(|_, f| Arc::strong_count(f) > 1);
            }
            folders.entry(dir.to_path_buf()).or_default().clone()
        };
        folder.sync(|| self.sync(dir))
    }

    /// Syncs `path`'s folder, then each folder above whose entry in its parent this
    /// process has not synced yet, up to the root.
    fn sync_folders(&self, path: &std::path::Path) -> std::io::Result<()> {
        let Some(mut dir) = path.parent() else { return Ok(()) };
        self.sync_folder(dir)?;
        while dir != self.root && dir.starts_with(&self.root) {
            if self.durable.lock().unwrap_or_else(|e| e.into_inner()).contains(dir) {
                break;
            }
            let Some(parent) = dir.parent() else { break };
            self.sync_folder(parent)?;
            let mut known = self.durable.lock().unwrap_or_else(|e| e.into_inner());
            if known.len() >= Self::MAX_KNOWN {
                known.clear();
            }
            known.insert(dir.to_path_buf());
            dir = parent;
        }
        Ok(())
    }

    /// Whether `path` is free, its folder made: objects are never overwritten, so most
    /// repeated writes stop here (racing ones at the final link).
    fn make_room(path: &std::path::Path) -> std::io::Result<bool> {
        if std::fs::symlink_metadata(path).is_ok() {
            return Ok(false);
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        Ok(true)
    }

    /// Creates `path` holding `bytes` unless it exists (false then): written to a staged
    /// file and synced, linked into place (which fails if the name exists), and its
    /// folders synced. An empty object cannot be seen half-written, so it is created in
    /// place.
    fn create(&self, path: &std::path::Path, bytes: &[u8]) -> std::io::Result<bool> {
        if !Self::make_room(path)? {
            return Ok(false);
        }
        if bytes.is_empty() {
            // Nothing to see half-written: created in place.
            return match std::fs::File::create_new(path) {
                Ok(file) => {
                    file.sync_all()?;
                    self.syncs.fetch_add(1, Ordering::Relaxed);
                    self.sync_folders(path).map(|()| true)
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
                Err(e) => Err(e),
            };
        }
        let mut suffix = [0u8; 8];
        getrandom::getrandom(&mut suffix).map_err(std::io::Error::other)?;
        let mut staged = path.as_os_str().to_owned();
        staged.push(format!("#{}", u64::from_le_bytes(suffix)));
        let staged = std::path::PathBuf::from(staged);
        let written = (|| {
            let mut file = std::fs::File::create_new(&staged)?;
            std::io::Write::write_all(&mut file, bytes)?;
            file.sync_all()?;
            self.syncs.fetch_add(1, Ordering::Relaxed);
            std::fs::hard_link(&staged, path)
        })();
        let _ = std::fs::remove_file(&staged);
        match written {
            Ok(()) => self.sync_folders(path).map(|()| true),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Creates `path` as another name of `original`, whose contents are `bytes`, unless
    /// `path` exists (false then). When `original` is gone, `bytes` are written instead.
    fn link(&self, original: &std::path::Path, path: &std::path::Path, bytes: &[u8]) -> std::io::Result<bool> {
        if !Self::make_room(path)? {
            return Ok(false);
        }
        match std::fs::hard_link(original, path) {
            Ok(()) => self.sync_folders(path).map(|()| true),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
            Err(e) if e.kind() == ErrorKind::NotFound => self.create(path, bytes),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_writes_share_their_folder_syncs() {
        let folder = Arc::new(FolderSync::default());
        let calls = Arc::new(AtomicU64::new(0));
        let start = Arc::new(std::sync::Barrier::new(8));
        let writers: Vec<_> = (0..8)
            .map(|_| {
                let (folder, calls, start) = (folder.clone(), calls.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    folder.sync(|| {
                        calls.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(50));
                        Ok(())
                    })
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap().unwrap();
        }
        // The first sync serves the changes before it; the others wait for one more.
        let n = calls.load(Ordering::SeqCst);
        assert!((1..=2).contains(&n), "{n} syncs for 8 writes");
        // A failed sync fails only the write that ran it; the others sync again.
        let failed = Arc::new(AtomicU64::new(0));
        let writers: Vec<_> = (0..4)
            .map(|_| {
                let (folder, failed) = (folder.clone(), failed.clone());
                std::thread::spawn(move || {
                    folder.sync(|| match failed.fetch_add(1, Ordering::SeqCst) {
                        0 => {
                            std::thread::sleep(Duration::from_millis(20));
                            Err(std::io::Error::other("disk gone"))
                        }
                        _ => Ok(()),
                    })
                })
            })
            .collect();
        let results: Vec<bool> = writers.into_iter().map(|w| w.join().unwrap().is_ok()).collect();
        assert_eq!(results.iter().filter(|ok| !**ok).count(), 1, "{results:?}");
    }

    #[tokio::test]
    async fn file_writes_and_deletes_are_synced_to_the_root() {
        let dir = std::env::temp_dir().join(format!("stacklens-store-sync-{}", std::process::id()));
        let store = Store::open(dir.to_str().unwrap(), Duration::from_secs(10)).unwrap();
        assert_eq!(store.syncs(), 0);
        assert!(store.create("tenants/t/sessions/x.json", Bytes::from_static(b"{}")).await.unwrap());
        // The file, then sessions/, t/, tenants/ and the root.
        assert_eq!(store.syncs(), 5);
        assert_eq!(store.get("tenants/t/sessions/x.json").await.unwrap().unwrap(), Bytes::from_static(b"{}"));
        // An object that exists is not written again, and not synced.
        assert!(!store.create("tenants/t/sessions/x.json", Bytes::from_static(b"[]")).await.unwrap());
        assert_eq!(store.syncs(), 5);
        // Beside it: the file and its folder; the folders above are durable already.
        assert!(store.create("tenants/t/sessions/y.json", Bytes::from_static(b"{}")).await.unwrap());
        assert_eq!(store.syncs(), 7);
        // In a new folder: the file, the folder, and the new folder's entry in t/.
        assert!(store.create("tenants/t/refs/x/upload", Bytes::new()).await.unwrap());
        assert_eq!(store.syncs(), 11, "file, refs/x/, its entry in refs/, refs/'s entry in t/");
        // A copy of a stored object is another name for its file: only its folders are synced.
        assert!(store
            .create_copy("tenants/t/by-sha/x", Bytes::from_static(b"{}"), "tenants/t/sessions/x.json")
            .await
            .unwrap());
        assert_eq!(store.syncs(), 13, "by-sha/ and its entry in t/, no file");
        assert!(!store
            .create_copy("tenants/t/by-sha/x", Bytes::from_static(b"{}"), "tenants/t/sessions/x.json")
            .await
            .unwrap());
        store.delete("tenants/t/sessions/x.json").await.unwrap();
        assert_eq!(store.syncs(), 14, "a delete syncs the folder it changed");
        assert!(store.get("tenants/t/sessions/x.json").await.unwrap().is_none());
        assert_eq!(
            store.get("tenants/t/by-sha/x").await.unwrap().unwrap(),
            Bytes::from_static(b"{}"),
            "the copy stays"
        );
        // A copy of an object that is gone is written from the bytes given.
        assert!(store
            .create_copy("tenants/t/by-sha/y", Bytes::from_static(b"[]"), "tenants/t/sessions/x.json")
            .await
            .unwrap());
        assert_eq!(store.get("tenants/t/by-sha/y").await.unwrap().unwrap(), Bytes::from_static(b"[]"));
        store.delete("tenants/t/by-sha/x").await.unwrap();
        store.delete("tenants/t/by-sha/y").await.unwrap();
        // Racing creates of one name: one wins, and no staged file is left or listed.
        let racers = (0..8).map(|i| {
            let store = store.clone();
            tokio::spawn(async move { store.create("tenants/t/race", Bytes::from(vec![i; 4])).await.unwrap() })
        });
        let won: Vec<bool> = futures::future::join_all(racers).await.into_iter().map(Result::unwrap).collect();
        assert_eq!(won.iter().filter(|&&w| w).count(), 1, "{won:?}");
        assert_eq!(store.list("tenants/t", None).await.unwrap(), ["race", "refs/x/upload", "sessions/y.json"]);
        let on_disk = std::fs::read_dir(dir.join("tenants/t")).unwrap().count();
        assert_eq!(on_disk, 4, "race, by-sha/, refs/ and sessions/ only");
        let memory = Store::open("memory://", Duration::from_secs(10)).unwrap();
        memory.create("a", Bytes::new()).await.unwrap();
        assert!(memory.create_copy("b", Bytes::from_static(b"x"), "a").await.unwrap());
        assert_eq!(memory.get("b").await.unwrap().unwrap(), Bytes::from_static(b"x"), "elsewhere a copy is a write");
        assert_eq!(memory.syncs(), 0, "only local folders are synced by stacklens");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn local_folders_list_in_the_order_object_stores_do() {
        let dir = std::env::temp_dir().join(format!("stacklens-store-order-{}", std::process::id()));
        let local = Store::open(dir.to_str().unwrap(), Duration::from_secs(10)).unwrap();
        let memory = Store::open("memory://", Duration::from_secs(10)).unwrap();
        for store in [&local, &memory] {
            for key in ["x/b", "x/a/b", "x/a-c", "x/a.d", "x/a/a/z", "y"] {
                store.create(key, Bytes::new()).await.unwrap();
            }
        }
        for store in [&local, &memory] {
            assert_eq!(
                store.list("x", None).await.unwrap(),
                ["a-c", "a.d", "a/a/z", "a/b", "b"],
                "{}",
                store.description
            );
            assert_eq!(store.list("x", Some("a.d")).await.unwrap(), ["a/a/z", "a/b", "b"]);
            assert_eq!(store.list("x", Some("a/a/z")).await.unwrap(), ["a/b", "b"]);
            let mut first = Vec::new();
            store
                .scan("x", Some("a-c"), |key| {
                    first.push(key);
                    first.len() < 2
                })
                .await
                .unwrap();
            assert_eq!(first, ["a.d", "a/a/z"]);
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
