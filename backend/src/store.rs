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
//!
//! What a piece of work reads is counted ([`counting_reads`]): range answers report it,
//! so that a query's cost in requests to the store is seen, not guessed.
mod backend;
mod local;

use std::future::Future;
use std::io::ErrorKind;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use self::backend::open_backend;
use self::local::LocalSync;

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

/// The requests to the store that one piece of work made to read: objects fetched
/// (found or not) and listings (a local folder read counts as one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reads {
    pub objects: u64,
    pub listings: u64,
}

tokio::task_local! {
    static READS: std::cell::Cell<Reads>;
}

/// Runs `work`, counting the reads it makes in this task (reads in tasks it spawns are
/// not counted).
pub async fn counting_reads<T>(work: impl Future<Output = T>) -> (T, Reads) {
    READS.scope(std::cell::Cell::new(Reads::default()), async { (work.await, READS.with(std::cell::Cell::get)) }).await
}

fn count_read(add: impl FnOnce(&mut Reads)) {
    let _ = READS.try_with(|reads| {
        let mut counted = reads.get();
        add(&mut counted);
        reads.set(counted);
    });
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
            local = Some(Arc::new(LocalSync::new(dir)));
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
        self.local.as_ref().map_or(0, |l| l.syncs.load(std::sync::atomic::Ordering::Relaxed))
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
        count_read(|r| r.objects += 1);
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

    /// Whether `key` exists (one HEAD, counted as a read).
    pub async fn exists(&self, key: &str) -> Result<bool, StoreError> {
        count_read(|r| r.objects += 1);
        if let Some((path, _)) = self.local_path(key) {
            return self.bounded(blocking(move || Ok(path.is_file()))).await;
        }
        self.bounded(async {
            match self.inner.head(&self.path(key)).await {
                Ok(_) => Ok(true),
                Err(object_store::Error::NotFound { .. }) => Ok(false),
                Err(e) => Err(e.into()),
            }
        })
        .await
    }

    /// The last `n` bytes of `key` (all of it when shorter): one ranged read, so that an
    /// object's footer is read without its body.
    pub async fn get_tail(&self, key: &str, n: u64) -> Result<Option<Bytes>, StoreError> {
        count_read(|r| r.objects += 1);
        if let Some((path, _)) = self.local_path(key) {
            return self
                .bounded(blocking(move || {
                    use std::io::{Read, Seek, SeekFrom};
                    let mut file = match std::fs::File::open(&path) {
                        Ok(file) if file.metadata()?.is_file() => file,
                        Ok(_) => return Ok(None),
                        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
                        Err(e) => return Err(e),
                    };
                    let len = file.metadata()?.len();
                    file.seek(SeekFrom::Start(len.saturating_sub(n)))?;
                    let mut tail = Vec::with_capacity(len.min(n) as usize);
                    file.read_to_end(&mut tail)?;
                    Ok(Some(Bytes::from(tail)))
                }))
                .await;
        }
        let options = object_store::GetOptions {
            range: Some(object_store::GetRange::Suffix(n)),
            ..object_store::GetOptions::default()
        };
        self.bounded(async {
            match self.inner.get_opts(&self.path(key), options).await {
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
        count_read(|r| r.listings += 1);
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
        count_read(|r| r.listings += 1);
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
    count_read(|r| r.listings += 1);
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

#[cfg(test)]
mod tests {
    use super::*;

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
