//! Durable writes to a `file://` store: objects written to a staged file, synced and
//! linked into place, and their folders synced up to the root, concurrent writes sharing
//! each folder's syncs.

use std::collections::{HashMap, HashSet};
use std::io::ErrorKind;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// Durable writes to a `file://` store, with the same layout as object_store's
/// LocalFileSystem (which lists past its staging names, `name#digits`), in one blocking
/// task per write instead of a put and then a sync.
#[derive(Debug, Default)]
pub(super) struct LocalSync {
    root: std::path::PathBuf,
    /// fsync calls made (files and folders), for tests.
    pub(super) syncs: AtomicU64,
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

    /// Writes under the folder `root`, none of whose folders is known to be durable yet.
    pub(super) fn new(root: PathBuf) -> Self {
        Self { root, ..Self::default() }
    }

    pub(super) fn sync(&self, path: &std::path::Path) -> std::io::Result<()> {
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
    pub(super) fn sync_folders(&self, path: &std::path::Path) -> std::io::Result<()> {
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
    pub(super) fn create(&self, path: &std::path::Path, bytes: &[u8]) -> std::io::Result<bool> {
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
    pub(super) fn link(
        &self,
        original: &std::path::Path,
        path: &std::path::Path,
        bytes: &[u8],
    ) -> std::io::Result<bool> {
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
    use std::time::Duration;

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
}
