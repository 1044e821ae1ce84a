//! What the server stores and how it is found: tenants' keys, sessions (raw profiles),
//! encrypted blobs, baselines, captures, schedules, samply runs, references that pin
//! bytes, leases, the time index of each service's profiles (series), how a query selects
//! from it (label selectors, Pyroscope's profile type ids), and the index of links that
//! expire.
//! Everything here speaks object storage and [`RecordError`]; nothing knows HTTP.

pub mod baselines;
pub mod blobs;
pub mod blocks;
pub mod buckets;
pub mod captures;
pub mod debuginfo;
pub mod expiring;
pub mod index;
pub mod leases;
pub mod profile_types;
pub mod refs;
pub mod samply;
pub mod schedules;
pub mod selector;
pub mod series;
pub mod sessions;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Serialize;
use sha2::Digest;
use stacklens_core::ids::RecordIdKind;
use stacklens_core::timestamp::Timestamp;

use crate::store::{Store, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("unknown {what} id '{id}'")]
    NotFound { what: Kind, id: String },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("a stored record is unreadable: {0}")]
    Corrupt(#[from] serde_json::Error),
    /// The link's time is up (`at`, RFC 3339); retention removes what it alone kept.
    #[error("the {what} '{id}' expired at {at}")]
    Expired { what: Kind, id: String, at: String },
    /// A session was asked for by the id of an encrypted blob, which the server cannot read.
    #[error("'{id}' is an encrypted blob, which the server cannot read")]
    EncryptedBlob { id: String },
}

/// The kinds of record an id can name.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    Session,
    Baseline,
    Capture,
    Blob,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Session => "session",
            Kind::Baseline => "baseline",
            Kind::Capture => "capture",
            Kind::Blob => "blob",
        })
    }
}

impl RecordError {
    pub fn not_found(what: Kind, id: &str) -> Self {
        RecordError::NotFound { what, id: id.to_owned() }
    }
}

pub type Result<T, E = RecordError> = std::result::Result<T, E>;

/// The tenant a record belongs to. Every object key starts with it, so one tenant can
/// neither read nor list another's objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tenant(pub String);

pub const DEFAULT_TENANT: &str = "default";

impl Tenant {
    /// The object key of `rest` for this tenant.
    pub fn key(&self, rest: &str) -> String {
        format!("tenants/{}/{rest}", self.0)
    }

    pub fn is_default(&self) -> bool {
        self.0 == DEFAULT_TENANT
    }
}

/// Letters, digits, '-' and '_' only: safe inside object keys (no '/', no '..').
pub fn valid_name(s: &str, max: usize) -> bool {
    !s.is_empty() && s.len() <= max && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `{prefix}-{128 random bits}`: ids that open records without a credential (share
/// links) must be unguessable, so they carry nothing derivable from the content.
pub fn random_id<Id: RecordIdKind>() -> Id {
    let mut bits = [0u8; 16];
    getrandom::getrandom(&mut bits).expect("the operating system's random source");
    Id::try_from(format!("{}-{}", Id::PREFIX, hex::encode(bits))).expect("a prefix and 32 hex digits are an id")
}

/// `{prefix}-{time-ordered uuid}`: for records only credential holders can reach,
/// whose listing order is their creation order.
pub fn ordered_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::now_v7().simple())
}

/// Now, as RFC 3339 with milliseconds (what records store).
pub fn now_rfc3339() -> String {
    rfc3339(now_millis())
}

/// Now, as records' times are.
pub fn now() -> Timestamp {
    Timestamp::from_millis(now_millis())
}

/// Milliseconds since the epoch as RFC 3339 with milliseconds.
pub fn rfc3339(millis: u64) -> String {
    Timestamp::from_millis(millis).into()
}

pub fn now_millis() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Reads a stored JSON record.
pub async fn load<T: DeserializeOwned>(store: &Store, key: &str) -> Result<Option<T>> {
    match store.get(key).await? {
        Some(bytes) => Ok(Some(serde_json::from_slice(&bytes)?)),
        None => Ok(None),
    }
}

/// A new delete token (256 random bits, hex) and its sha256, which is all that is stored.
pub fn delete_token() -> (String, [u8; 32]) {
    let mut bits = [0u8; 32];
    getrandom::getrandom(&mut bits).expect("the operating system's random source");
    let token = hex::encode(bits);
    let digest = sha2::Sha256::digest(token.as_bytes()).into();
    (token, digest)
}

/// Whether `token` hashes to `stored` (a sha256 in hex), compared in constant time.
pub fn token_matches(stored: &str, token: &str) -> bool {
    let given: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
    let mut digest = [0u8; 32];
    hex::decode_to_slice(stored, &mut digest).is_ok() && same_digest(&digest, &given)
}

/// Whether two digests are equal, in time that does not depend on where they differ.
pub fn same_digest(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Creates a JSON record unless `key` exists; true when this call created it.
pub async fn create<T: Serialize>(store: &Store, key: &str, record: &T) -> Result<bool> {
    Ok(store.create(key, Bytes::from(serde_json::to_vec(record)?)).await?)
}

/// Files index entries written in an earlier layout into the current one, for every
/// tenant; a server runs it as it starts. Replicas doing it at once create the same
/// objects (create-only) and delete the same ones.
pub async fn refile_legacy_entries(store: &Store) -> Result<usize> {
    let mut refiled = 0;
    for tenant in store.list_folders("tenants").await? {
        let tenant = Tenant(tenant);
        refiled += sessions::refile_legacy_entries(store, &tenant).await?;
        refiled += captures::refile_legacy_entries(store, &tenant).await?;
    }
    Ok(refiled)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use stacklens_core::ids::CaptureId;
    use stacklens_core::ProfileKind;

    use super::*;

    fn session(service: &str, kind: ProfileKind) -> sessions::NewSession {
        sessions::NewSession {
            service: service.to_owned(),
            name: "p".to_owned(),
            labels: BTreeMap::new(),
            profile_type: kind,
            sample_types: vec!["samples".to_owned()],
            sample_count: 1,
            duration_seconds: 0.0,
            expires: None,
        }
    }

    /// Moves every object under `from` to the same name directly in `to`: the index
    /// layout before buckets (and, for sessions, before names carried the type).
    async fn unbucket(store: &Store, from: &str, to: &str, rename: impl Fn(&str) -> String) {
        for key in store.list(from, None).await.unwrap() {
            let body = store.get(&format!("{from}/{key}")).await.unwrap().unwrap();
            let name = key.rsplit('/').next().unwrap();
            store.create(&format!("{to}/{}", rename(name)), body).await.unwrap();
            store.delete(&format!("{from}/{key}")).await.unwrap();
        }
    }

    #[tokio::test]
    async fn entries_an_earlier_version_wrote_are_listed_after_refiling() {
        let dir = std::env::temp_dir().join(format!("stacklens-refile-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let timeout = Duration::from_secs(10);
        for store in [Store::open(dir.to_str().unwrap(), timeout).unwrap(), Store::open("memory://", timeout).unwrap()]
        {
            let tenant = Tenant("acme".to_owned());
            let mut ids = Vec::new();
            for (i, (service, kind)) in
                [("shop", ProfileKind::Cpu), ("shop", ProfileKind::Memory), ("", ProfileKind::Cpu)]
                    .into_iter()
                    .enumerate()
            {
                let bytes = Bytes::from(vec![i as u8; 8]);
                let stored = sessions::store(&store, &tenant, bytes, session(service, kind), &refs::Holder::Upload)
                    .await
                    .unwrap();
                ids.push(stored.record.id.to_string());
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            ids.reverse();
            let started = captures::Started {
                id: CaptureId::parse("cap-0123456789abcdef0123456789abcdef").unwrap(),
                service: "shop".to_owned(),
                profile_type: ProfileKind::Cpu,
                started_at: now(),
                duration_seconds: 1,
                sample_rate: None,
                slot: None,
            };
            captures::start(&store, &tenant, &started).await.unwrap();
            let listed = |service: Option<&'static str>, kind: Option<ProfileKind>| {
                let (store, tenant) = (&store, &tenant);
                async move {
                    let (page, _) = sessions::list(store, tenant, service, kind, 10, None).await.unwrap();
                    page.into_iter().map(|r| r.id.to_string()).collect::<Vec<_>>()
                }
            };
            let history = || captures::history(&store, &tenant, "shop", ProfileKind::Cpu, 0, u64::MAX);
            assert_eq!(listed(None, None).await, ids, "{}", store.description);

            let by_time = tenant.key("sessions-by-time");
            unbucket(&store, &by_time, &by_time, |name| name.split('.').next().unwrap().to_owned()).await;
            for key in store.list(&tenant.key("sessions-by-service"), None).await.unwrap() {
                store.delete(&format!("{}/{key}", tenant.key("sessions-by-service"))).await.unwrap();
            }
            let by_service = tenant.key(&format!("captures-by/s{}/cpu", hex::encode("shop")));
            unbucket(&store, &by_service, &by_service, str::to_owned).await;
            assert_eq!(listed(None, None).await, Vec::<String>::new(), "the old layout is not read");
            assert_eq!(history().await.unwrap().len(), 0);

            assert_eq!(refile_legacy_entries(&store).await.unwrap(), 4, "three sessions and a capture");
            assert_eq!(listed(None, None).await, ids, "{}", store.description);
            assert_eq!(listed(Some("shop"), None).await, ids[1..]);
            assert_eq!(listed(Some("shop"), Some(ProfileKind::Cpu)).await, ids[2..]);
            assert_eq!(listed(None, Some(ProfileKind::Cpu)).await, [ids[0].clone(), ids[2].clone()]);
            assert_eq!(
                history().await.unwrap().into_iter().map(|e| e.started.id.to_string()).collect::<Vec<_>>(),
                [started.id.as_str()]
            );
            assert_eq!(refile_legacy_entries(&store).await.unwrap(), 0, "once only");

            // Deleting a session removes every entry of it.
            let record = sessions::find(&store, &tenant, &ids[1]).await.unwrap();
            index::delete(&store, &tenant, &record).await.unwrap();
            assert_eq!(listed(Some("shop"), None).await, ids[2..]);
            assert_eq!(listed(None, None).await, [ids[0].clone(), ids[2].clone()]);
            let entries = store.list(&tenant.key("sessions-by-service"), None).await.unwrap();
            assert_eq!(entries.len(), 1, "{entries:?}");
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    /// Uploads of the same bytes share one link: later expiries extend it, shorter ones
    /// do not shorten it, none makes it last; the sweep ends it only once the latest
    /// expiry passed. Each upload's token revokes it; other strings do not.
    #[tokio::test]
    async fn uploads_of_the_same_bytes_extend_a_link_and_each_token_revokes_it() {
        let store = Store::open("memory://", Duration::from_secs(10)).unwrap();
        let tenant = Tenant("acme".to_owned());
        let upload = |bytes: &'static [u8], expires: Option<u64>| {
            let new = sessions::NewSession { expires, ..session("", ProfileKind::Cpu) };
            sessions::store(&store, &tenant, Bytes::from_static(bytes), new, &refs::Holder::Upload)
        };
        let now = now_millis();
        let (soon, later) = (now + 300, now + 900);
        let first = upload(b"extended", Some(soon)).await.unwrap();
        let id = first.record.id.clone();
        assert_eq!(first.record.expires_at, Some(Timestamp::from_millis(soon)));
        let shorter = upload(b"extended", Some(now + 100)).await.unwrap();
        assert_eq!((shorter.created, &shorter.record.id), (false, &id));
        assert_eq!(shorter.record.expires_at, Some(Timestamp::from_millis(soon)), "not shortened");
        let longer = upload(b"extended", Some(later)).await.unwrap();
        assert_eq!(longer.record.expires_at, Some(Timestamp::from_millis(later)));
        let lasting = upload(b"lasting", Some(soon)).await.unwrap();
        let made_lasting = upload(b"lasting", None).await.unwrap();
        assert_eq!((&made_lasting.record.id, &made_lasting.record.expires_at), (&lasting.record.id, &None));
        assert_eq!(sessions::find(&store, &tenant, &id).await.unwrap().expires_at, Some(Timestamp::from_millis(later)));

        tokio::time::sleep(Duration::from_millis(soon - now + 50)).await;
        for session in [&id, &lasting.record.id] {
            index::expire(&store, &tenant, session, now_millis()).await.unwrap();
            assert!(sessions::find(&store, &tenant, session).await.is_ok(), "{session} lives on");
        }
        tokio::time::sleep(Duration::from_millis(later - soon)).await;
        match sessions::find(&store, &tenant, &id).await {
            Err(RecordError::Expired { what: Kind::Session, at, .. }) => assert_eq!(at, rfc3339(later)),
            other => panic!("{:?}", other.map(|r| r.id)),
        }
        index::expire(&store, &tenant, &id, now_millis()).await.unwrap();
        assert!(!sessions::exists(&store, &tenant, &id).await.unwrap(), "nothing else held it");
        assert_eq!(store.list(&tenant.key(&format!("uploads/{id}")), None).await.unwrap(), Vec::<String>::new());

        // Tokens: each upload's own revokes the shared link.
        let lasting_id = &lasting.record.id;
        for token in [&lasting.delete_token, &made_lasting.delete_token] {
            let token = token.as_deref().unwrap();
            assert!(sessions::revocable_by(&store, &tenant, lasting_id, token).await.unwrap());
        }
        let (stranger, _) = delete_token();
        assert!(!sessions::revocable_by(&store, &tenant, lasting_id, &stranger).await.unwrap());
        assert!(!sessions::revocable_by(&store, &tenant, lasting_id, "").await.unwrap());
        let stored = store.get(&tenant.key(&format!("sessions/{lasting_id}.json"))).await.unwrap().unwrap();
        let token = lasting.delete_token.unwrap();
        assert!(!String::from_utf8_lossy(&stored).contains(&token), "only the hash is stored");
        // Captures get no token.
        let captured = sessions::store(
            &store,
            &tenant,
            Bytes::from_static(b"captured"),
            session("", ProfileKind::Cpu),
            &refs::Holder::Record("cap-0123456789abcdef0123456789abcdef".to_owned()),
        )
        .await
        .unwrap();
        assert!(captured.delete_token.is_none());
    }
}
