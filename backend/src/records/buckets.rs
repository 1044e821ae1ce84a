//! Time-ordered indexes that list only what a page or a range reaches. An entry's name
//! starts with 16 hex digits of a time (milliseconds since the epoch, or their
//! inversion for newest-first order) and lives in the bucket folder named by its first
//! [`BUCKET_DIGITS`] digits: 2^24 ms, about 4.7 hours. Why that size: a year is about
//! 1,900 buckets, two listing requests for the bucket names; a service captured every
//! 10 s puts 1,700 entries in a bucket, two requests of a page each; and inverted times
//! bucket the same way as plain ones (a prefix of the digits), so one scheme serves both
//! orders. Stores that list in order read only the entries a page takes. Within a
//! bucket, entries lie in a folder per 2^16 ms (about a minute), which costs an ordered
//! listing nothing (a prefix of the name again) and keeps each folder of a local store,
//! read whole, small: a burst of 100,000 uploads fills a few (see [`Store::scan`]).

use super::Result;
use crate::store::Store;

/// How many leading hex digits of an entry's time name its bucket.
pub const BUCKET_DIGITS: usize = 10;

/// How many name its folder within the bucket.
const FOLDER_DIGITS: usize = 12;

/// The key of an entry named `name` (16 hex digits of time first) in the index at `prefix`.
pub fn key(prefix: &str, name: &str) -> String {
    format!("{prefix}/{}/{}", &name[..BUCKET_DIGITS], within(name))
}

/// An entry's key inside its bucket.
fn within(name: &str) -> String {
    format!("{}/{name}", &name[..FOLDER_DIGITS])
}

/// An entry's name from its key inside its bucket.
fn name_of(key: String) -> String {
    match key.rsplit_once('/') {
        Some((_, name)) => name.to_owned(),
        None => key,
    }
}

/// Whether `name` starts with 16 hex digits of time.
pub fn timed(name: &str) -> bool {
    name.len() > 16 && name.as_bytes()[..16].iter().all(u8::is_ascii_hexdigit)
}

/// Up to `limit` entry names in name order, after `after` (a name [`page`] returned)
/// if given, each one `keep` accepts. `buckets` are the index's bucket folders, as
/// [`Store::list_level`] gave them.
pub async fn page(
    store: &Store,
    prefix: &str,
    buckets: &[String],
    after: Option<&str>,
    limit: usize,
    keep: impl Fn(&str) -> bool + Send + Sync,
) -> Result<Vec<String>> {
    let mut page = Vec::new();
    let first = after.map_or("", |a| &a[..BUCKET_DIGITS]);
    for bucket in buckets.iter().filter(|b| b.as_str() >= first) {
        let offset = after.filter(|a| a.starts_with(bucket.as_str())).map(within);
        store
            .scan(&format!("{prefix}/{bucket}"), offset.as_deref(), |key| {
                let name = name_of(key);
                if keep(&name) {
                    page.push(name);
                }
                page.len() < limit
            })
            .await?;
        if page.len() == limit {
            break;
        }
    }
    Ok(page)
}

/// The entry names whose time digits lie in `from..=to` (both 16 hex digits), in order.
pub async fn range(store: &Store, prefix: &str, buckets: &[String], from: &str, to: &str) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let (first, last) = (&from[..BUCKET_DIGITS], &to[..BUCKET_DIGITS]);
    for bucket in buckets.iter().filter(|b| (first..=last).contains(&b.as_str())) {
        // Names after `from`'s digits sort after every earlier time's names.
        let offset = previous(from).filter(|o| o.starts_with(bucket.as_str())).map(|o| within(&o));
        store
            .scan(&format!("{prefix}/{bucket}"), offset.as_deref(), |key| {
                let name = name_of(key);
                if name.get(..16).is_some_and(|time| time > to) {
                    return false;
                }
                if timed(&name) {
                    names.push(name);
                }
                true
            })
            .await?;
    }
    Ok(names)
}

/// A name after every name of the time before `time`, and before `time`'s names: those
/// continue their 16 digits with '-', which sorts before '.' (a character object paths
/// keep as it is, unlike '~').
fn previous(time: &str) -> Option<String> {
    let before = u64::from_str_radix(time, 16).ok()?.checked_sub(1)?;
    Some(format!("{before:016x}."))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;

    use super::*;

    /// A local folder (which lists without order) and memory (which lists in order).
    fn stores(test: &str) -> Vec<Store> {
        let dir = std::env::temp_dir().join(format!("stacklens-buckets-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let timeout = Duration::from_secs(10);
        vec![Store::open(dir.to_str().unwrap(), timeout).unwrap(), Store::open("memory://", timeout).unwrap()]
    }

    const BASE: u64 = 0x18c_0000_0000;
    const BUCKET: u64 = 1 << 24;

    const FOLDER: u64 = 1 << 16;

    /// Entries in three buckets with an empty one between, two of them at the same time,
    /// the first bucket's in two of its folders.
    async fn filed(store: &Store) -> Vec<String> {
        let times =
            [BASE + 1, BASE + 2, BASE + 2, BASE + FOLDER, BASE + BUCKET + 5, BASE + 3 * BUCKET, BASE + 3 * BUCKET + 7];
        let names: Vec<String> = times.iter().enumerate().map(|(i, t)| format!("{t:016x}-e{i}")).collect();
        for name in names.iter().rev() {
            store.create(&key("index", name), Bytes::new()).await.unwrap();
        }
        names
    }

    #[tokio::test]
    async fn pages_continue_after_their_last_name_across_buckets() {
        for store in stores("pages") {
            let names = filed(&store).await;
            let bucketed = store.list_level("index").await.unwrap().folders;
            assert_eq!(bucketed, ["0000018c00", "0000018c01", "0000018c03"], "{}", store.description);
            for limit in 1..=4 {
                let (mut all, mut after) = (Vec::new(), None::<String>);
                loop {
                    let page = page(&store, "index", &bucketed, after.as_deref(), limit, |_| true).await.unwrap();
                    assert!(page.len() <= limit);
                    all.extend(page.iter().cloned());
                    match page.last() {
                        Some(last) if page.len() == limit => after = Some(last.clone()),
                        _ => break,
                    }
                }
                assert_eq!(all, names, "limit {limit} on {}", store.description);
            }
            let odd = page(&store, "index", &bucketed, None, 10, |n| n.ends_with(['1', '3', '5'])).await.unwrap();
            assert_eq!(odd, [names[1].clone(), names[3].clone(), names[5].clone()]);
        }
    }

    #[tokio::test]
    async fn ranges_hold_the_times_from_their_start_to_their_end() {
        for store in stores("ranges") {
            let names = filed(&store).await;
            let bucketed = store.list_level("index").await.unwrap().folders;
            let range = |from: u64, to: u64| {
                let (store, bucketed) = (&store, &bucketed);
                async move { range(store, "index", bucketed, &format!("{from:016x}"), &format!("{to:016x}")).await.unwrap() }
            };
            assert_eq!(range(0, u64::MAX).await, names, "{}", store.description);
            assert_eq!(range(BASE + 2, BASE + 2).await, names[1..3], "both entries of one time");
            assert_eq!(range(BASE + 2, BASE + BUCKET + 5).await, names[1..5]);
            assert_eq!(range(BASE + BUCKET, BASE + 3 * BUCKET).await, names[4..6], "from a bucket's first time");
            assert_eq!(range(BASE + FOLDER, BASE + FOLDER).await, names[3..4], "from a folder's first time");
            assert_eq!(range(BASE + 3, BASE + FOLDER - 1).await, Vec::<String>::new());
            assert_eq!(range(BASE + FOLDER + 1, BASE + BUCKET + 4).await, Vec::<String>::new());
            assert_eq!(range(BASE + 2 * BUCKET, BASE + 3 * BUCKET - 1).await, Vec::<String>::new(), "an empty bucket");
        }
    }
}
