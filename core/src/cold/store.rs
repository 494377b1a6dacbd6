//! Where cold objects live: one trait, with the S3 store (`super::s3`) for
//! clusters and an in-memory store for tests and a single node.

use std::collections::HashMap;
use std::sync::Mutex;

use bytes::Bytes;
use futures_util::future::BoxFuture;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ColdError {
    /// The store did not answer, or answered with an error.
    #[error("the cold store failed: {0}")]
    Unavailable(String),
    #[error("cold object {0} is missing")]
    Missing(String),
    /// The bytes fetched do not match the digest the log recorded.
    #[error("cold object {0} does not match its digest")]
    Corrupt(String),
}

pub type ColdResult<'a, T> = BoxFuture<'a, Result<T, ColdError>>;

/// Sees each piece of a ranged read as it arrives, so a check of the bytes
/// (a digest) runs while the rest are still on their way.
pub type OnPiece<'a> = &'a mut (dyn FnMut(&[u8]) + Send);

pub trait ColdStore: Send + Sync + 'static {
    /// Stores `body` under `key` (a new object; keys are never reused).
    fn put<'a>(&'a self, key: &'a str, body: Bytes) -> ColdResult<'a, ()>;
    /// Bytes `[offset, offset + len)` of the object at `key`.
    fn get_range<'a>(&'a self, key: &'a str, offset: u64, len: u64) -> ColdResult<'a, Bytes>;
    /// The same bytes as `get_range`, as the pieces they arrived in: a
    /// store that receives them in parts (S3) hands them over without
    /// joining them (a copy of every fetched byte), each shown to
    /// `on_piece` as soon as it is read.
    fn get_range_pieces<'a>(
        &'a self,
        key: &'a str,
        offset: u64,
        len: u64,
        on_piece: OnPiece<'a>,
    ) -> ColdResult<'a, Vec<Bytes>> {
        Box::pin(async move {
            let bytes = self.get_range(key, offset, len).await?;
            on_piece(&bytes);
            Ok(vec![bytes])
        })
    }
    /// The whole object at `key`.
    fn get<'a>(&'a self, key: &'a str) -> ColdResult<'a, Bytes>;
    fn delete<'a>(&'a self, key: &'a str) -> ColdResult<'a, ()>;
    /// Deletes up to 1,000 `keys` in one request; returns those it could not delete.
    fn delete_batch<'a>(&'a self, keys: &'a [String]) -> ColdResult<'a, Vec<String>>;
    /// The stored length of the object at `key` (a HEAD).
    fn size<'a>(&'a self, key: &'a str) -> ColdResult<'a, u64>;
    /// The keys of every object under `prefix`.
    fn list<'a>(&'a self, prefix: &'a str) -> ColdResult<'a, Vec<String>>;
    /// As `list`, with each object's length.
    fn list_sized<'a>(&'a self, prefix: &'a str) -> ColdResult<'a, Vec<(String, u64)>>;
    /// Whether any object lives under `prefix` (without listing them all).
    fn any_under<'a>(&'a self, prefix: &'a str) -> ColdResult<'a, bool> {
        Box::pin(async move { Ok(!self.list(prefix).await?.is_empty()) })
    }
}

/// Objects in a map: the store of `storage.cold.backend = "memory"`.
#[derive(Default)]
pub struct MemoryColdStore {
    objects: Mutex<HashMap<String, Bytes>>,
}

impl MemoryColdStore {
    fn objects(&self) -> std::sync::MutexGuard<'_, HashMap<String, Bytes>> {
        self.objects.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl ColdStore for MemoryColdStore {
    fn put<'a>(&'a self, key: &'a str, body: Bytes) -> ColdResult<'a, ()> {
        self.objects().insert(key.to_string(), body);
        Box::pin(async { Ok(()) })
    }

    fn get_range<'a>(&'a self, key: &'a str, offset: u64, len: u64) -> ColdResult<'a, Bytes> {
        let found = self.objects().get(key).cloned();
        Box::pin(async move {
            let object = found.ok_or_else(|| ColdError::Missing(key.to_string()))?;
            let lo = usize::try_from(offset).unwrap_or(usize::MAX);
            let hi = usize::try_from(offset.saturating_add(len)).unwrap_or(usize::MAX);
            if hi > object.len() || lo > hi {
                return Err(ColdError::Corrupt(key.to_string()));
            }
            Ok(object.slice(lo..hi))
        })
    }

    fn get<'a>(&'a self, key: &'a str) -> ColdResult<'a, Bytes> {
        let found = self.objects().get(key).cloned();
        Box::pin(async move { found.ok_or_else(|| ColdError::Missing(key.to_string())) })
    }

    fn delete<'a>(&'a self, key: &'a str) -> ColdResult<'a, ()> {
        self.objects().remove(key);
        Box::pin(async { Ok(()) })
    }

    fn delete_batch<'a>(&'a self, keys: &'a [String]) -> ColdResult<'a, Vec<String>> {
        let mut objects = self.objects();
        for key in keys {
            objects.remove(key);
        }
        Box::pin(async { Ok(Vec::new()) })
    }

    fn size<'a>(&'a self, key: &'a str) -> ColdResult<'a, u64> {
        let found = self.objects().get(key).map(|o| o.len() as u64);
        Box::pin(async move { found.ok_or_else(|| ColdError::Missing(key.to_string())) })
    }

    fn list<'a>(&'a self, prefix: &'a str) -> ColdResult<'a, Vec<String>> {
        let keys = self.objects().keys().filter(|k| k.starts_with(prefix)).cloned().collect();
        Box::pin(async { Ok(keys) })
    }

    fn list_sized<'a>(&'a self, prefix: &'a str) -> ColdResult<'a, Vec<(String, u64)>> {
        let objects = self.objects();
        let listed: Vec<(String, u64)> =
            objects.iter().filter(|(k, _)| k.starts_with(prefix)).map(|(k, v)| (k.clone(), v.len() as u64)).collect();
        drop(objects);
        Box::pin(async { Ok(listed) })
    }
}

/// A memory store that awaits `before_range` before each ranged read:
/// tests count, gate or locate the reads with it.
#[cfg(test)]
pub(crate) struct RangeHook {
    pub inner: MemoryColdStore,
    pub before_range: Box<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>,
}

#[cfg(test)]
impl ColdStore for RangeHook {
    fn put<'a>(&'a self, key: &'a str, body: Bytes) -> ColdResult<'a, ()> {
        self.inner.put(key, body)
    }
    fn get_range<'a>(&'a self, key: &'a str, offset: u64, len: u64) -> ColdResult<'a, Bytes> {
        let before = (self.before_range)();
        Box::pin(async move {
            before.await;
            self.inner.get_range(key, offset, len).await
        })
    }
    fn get<'a>(&'a self, key: &'a str) -> ColdResult<'a, Bytes> {
        self.inner.get(key)
    }
    fn delete<'a>(&'a self, key: &'a str) -> ColdResult<'a, ()> {
        self.inner.delete(key)
    }
    fn delete_batch<'a>(&'a self, keys: &'a [String]) -> ColdResult<'a, Vec<String>> {
        self.inner.delete_batch(keys)
    }
    fn size<'a>(&'a self, key: &'a str) -> ColdResult<'a, u64> {
        self.inner.size(key)
    }
    fn list<'a>(&'a self, prefix: &'a str) -> ColdResult<'a, Vec<String>> {
        self.inner.list(prefix)
    }
    fn list_sized<'a>(&'a self, prefix: &'a str) -> ColdResult<'a, Vec<(String, u64)>> {
        self.inner.list_sized(prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_memory_store_serves_ranges_and_reports_what_is_missing() {
        let store = MemoryColdStore::default();
        store.put("a", Bytes::from_static(b"hello world")).await.expect("put");
        assert_eq!(store.get_range("a", 6, 5).await.expect("range"), Bytes::from_static(b"world"));
        assert_eq!(store.get_range("a", 6, 50).await, Err(ColdError::Corrupt("a".into())));
        assert_eq!(store.list("").await.expect("list"), vec!["a".to_string()]);
        assert!(store.list("b").await.expect("list").is_empty());
        store.delete("a").await.expect("delete");
        assert_eq!(store.get_range("a", 0, 1).await, Err(ColdError::Missing("a".into())));
    }
}
