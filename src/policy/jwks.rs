//! The issuer's signing keys for [`super::oauth`]: a JSON Web Key Set read from `jwks_file`, or
//! fetched from `jwks_url` and cached. Which keys of a set are kept is the set's format, in
//! `config::jwks` (the configuration checks a `jwks_file` with it at load).
//!
//! Fetching is careful with the issuer: one fetch at a time, a short pause after a failure, and a
//! token naming an unknown `kid` (rotation) refetches at most once per [`JWKS_REFETCH_FLOOR`].

use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::Algorithm;

use crate::config::jwks::{self, SigningKey as Key};

/// Keys fetched from `jwks_url` are used this long before they are fetched again.
pub(super) const JWKS_TTL: Duration = Duration::from_secs(600);
/// A token with an unknown `kid` triggers a refetch (the issuer may have rotated its keys), but
/// at most once per this interval, so garbage tokens cannot turn the gateway against the issuer.
pub const JWKS_REFETCH_FLOOR: Duration = Duration::from_secs(30);
/// After a failed fetch, requests do not try again before this.
const JWKS_RETRY_AFTER_FAILURE: Duration = Duration::from_secs(2);
pub(super) const JWKS_FETCH_TIMEOUT: Duration = Duration::from_secs(5);
const JWKS_MAX_BYTES: usize = 1 << 20;

/// The issuer's usable keys at one point in time.
#[derive(Default)]
pub(super) struct KeySet {
    pub(super) keys: Vec<Key>,
    pub(super) fetched_at: Option<Instant>,
}

impl KeySet {
    /// The accepted signature keys in a key set document (see [`jwks::parse`]).
    pub(super) fn parse(bytes: &[u8]) -> Result<KeySet, String> {
        Ok(KeySet {
            keys: jwks::parse(bytes)?,
            fetched_at: Some(Instant::now()),
        })
    }

    /// A `jwks_file`, read now.
    pub(super) fn load_file(path: &Path) -> Result<KeySet, String> {
        Ok(KeySet {
            keys: jwks::read_file(path)?,
            fetched_at: Some(Instant::now()),
        })
    }

    /// The keys a token with `kid` and `alg` may be checked against.
    pub(super) fn candidates(&self, kid: Option<&str>, alg: Algorithm) -> Vec<&Key> {
        self.keys
            .iter()
            .filter(|k| match kid {
                Some(kid) => k.kid.as_deref() == Some(kid),
                None => true,
            })
            .filter(|k| k.family == alg.family() && k.alg.is_none_or(|a| a == alg))
            .collect()
    }
}

/// Where the keys come from.
pub(super) enum KeySource {
    File(KeySet),
    Url(Arc<RemoteKeys>),
}

/// Keys fetched from `jwks_url`, cached; at most one fetch runs at a time.
pub(super) struct RemoteKeys {
    pub(super) url: String,
    pub(super) client: reqwest::Client,
    pub(super) current: RwLock<Arc<KeySet>>,
    pub(super) fetch: tokio::sync::Mutex<FetchLog>,
}

#[derive(Default)]
pub(super) struct FetchLog {
    generation: u64,
    failed_at: Option<Instant>,
    forced_at: Option<Instant>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Why {
    Stale,
    UnknownKid,
}

impl RemoteKeys {
    pub(super) fn current(&self) -> Arc<KeySet> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Fetches the key set again unless another request just did, a fetch failed a moment ago,
    /// or (for an unknown `kid`) the refetch floor has not passed. Failures keep the old keys.
    pub(super) async fn refresh(&self, seen_generation: u64, why: Why) {
        let mut log = self.fetch.lock().await;
        if log.generation != seen_generation {
            return; // someone else fetched while we waited for the lock
        }
        if log
            .failed_at
            .is_some_and(|t| t.elapsed() < JWKS_RETRY_AFTER_FAILURE)
        {
            return;
        }
        if why == Why::UnknownKid {
            if log
                .forced_at
                .is_some_and(|t| t.elapsed() < JWKS_REFETCH_FLOOR)
            {
                return;
            }
            log.forced_at = Some(Instant::now());
        }
        match self.download().await {
            Ok(keys) if keys.keys.is_empty() => {
                // Counts as a failure (the cached keys stay), so requests do not refetch it back
                // to back.
                tracing::error!(url = %self.url, "the issuer's JWKS holds no RS256, ES256 or EdDSA signature key; keeping the keys cached before, if any");
                log.failed_at = Some(Instant::now());
            }
            Ok(keys) => {
                tracing::info!(url = %self.url, keys = keys.keys.len(), "fetched the issuer's JWKS");
                *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(keys);
                log.failed_at = None;
            }
            Err(e) => {
                tracing::error!(url = %self.url, "cannot fetch the issuer's JWKS: {e}; tokens signed by keys not cached yet are refused");
                log.failed_at = Some(Instant::now());
            }
        }
        log.generation += 1;
    }

    async fn download(&self) -> Result<KeySet, String> {
        let response = self
            .client
            .get(&self.url)
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            return Err(format!("HTTP {}", response.status()));
        }
        if response
            .content_length()
            .is_some_and(|n| n > JWKS_MAX_BYTES as u64)
        {
            return Err(format!("the key set is larger than {JWKS_MAX_BYTES} bytes"));
        }
        let bytes = response.bytes().await.map_err(|e| e.to_string())?;
        if bytes.len() > JWKS_MAX_BYTES {
            return Err(format!("the key set is larger than {JWKS_MAX_BYTES} bytes"));
        }
        KeySet::parse(&bytes)
    }

    pub(super) fn generation(&self) -> u64 {
        self.fetch.try_lock().map_or(u64::MAX, |log| log.generation)
    }
}
