//! Draw seeds: from the OS's CSPRNG, sealed with ChaCha20-Poly1305 under the seal key with the
//! drop's id and the commitment as associated data (moved to another drop, a seal does not open).
//! First-layout seals (no version byte, no drop id) open against the commitment alone; the
//! database never replaces a draw's row. Each seal names its key by an id derived from it, so a
//! ring of the current and retired keys opens every seal.

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Nonce};
use goods_domain::ports::{SealedSecret, SecretVault, SeedVault};
use goods_domain::webhook::WebhookSecret;
use goods_domain::{
    DrawCommitment, DrawSeed, DropId, EndpointId, InfraError, SealError, SealedSeed,
};
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
/// The first byte of a seal that binds the drop's id.
const BOUND_TO_DROP: u8 = 2;
/// A seal of the first layout: nonce, the 32-byte seed encrypted, the 16-byte tag.
const FIRST_LAYOUT_LEN: usize = NONCE_LEN + 32 + TAG_LEN;

/// The associated data of a seal that binds the drop's id.
fn bound(drop: DropId, commitment: &DrawCommitment) -> Vec<u8> {
    let mut aad = b"goods draw seed v2\0".to_vec();
    aad.extend(drop.get().to_be_bytes());
    aad.extend(commitment.bytes());
    aad
}

/// One seal key: 32 random bytes.
#[derive(Clone)]
pub struct SealKey {
    id: String,
    cipher: ChaCha20Poly1305,
}

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SealKey({})", self.id)
    }
}

impl SealKey {
    /// The key of these 32 bytes.
    pub fn from_bytes(bytes: &[u8; 32]) -> Self {
        let id = Sha256::new()
            .chain_update(b"goods draw seal key id\0")
            .chain_update(bytes)
            .finalize();
        Self {
            id: hex::encode(&id[..8]),
            cipher: ChaCha20Poly1305::new(bytes.into()),
        }
    }

    /// Its id: 16 hex digits of a hash of the key, stored with every seed it seals.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// `msg` sealed with `aad` as associated data: a fresh nonce, then the ciphertext and tag.
    /// `what` names the sealed thing in an error.
    fn seal_bytes(&self, msg: &[u8], aad: &[u8], what: &str) -> Result<Vec<u8>, InfraError> {
        let nonce = random::<NONCE_LEN>()?;
        let ciphertext = self
            .cipher
            .encrypt(Nonce::from_slice(&nonce), Payload { msg, aad })
            .map_err(|_| InfraError::msg(format!("sealing {what} failed")))?;
        let mut sealed = nonce.to_vec();
        sealed.extend(ciphertext);
        Ok(sealed)
    }

    /// What [`Self::seal_bytes`] sealed with the same `aad`, as `N` bytes; an error naming
    /// `what` if the seal does not open or holds another length.
    fn open_bytes<const N: usize>(
        &self,
        sealed: &[u8],
        aad: &[u8],
        what: &str,
    ) -> Result<[u8; N], InfraError> {
        if sealed.len() != NONCE_LEN + N + TAG_LEN {
            return Err(InfraError::msg(format!("{what} has no known layout")));
        }
        let (nonce, msg) = sealed.split_at(NONCE_LEN);
        let bytes = self
            .cipher
            .decrypt(Nonce::from_slice(nonce), Payload { msg, aad })
            .map_err(|_| InfraError::msg(format!("{what} does not open")))?;
        bytes
            .try_into()
            .map_err(|_| InfraError::msg(format!("{what} is not {N} bytes")))
    }
}

/// Where the seal keys come from.
#[derive(Debug)]
enum Keys {
    /// None configured: draws cannot be created.
    None,
    /// `DRAW_SEAL_KEY`: the first seals, every one opens.
    Ring(Vec<SealKey>),
    /// The embedded mode's own key, in a file beside the database, made on first use.
    File {
        path: PathBuf,
        loaded: Mutex<Option<SealKey>>,
    },
}

#[derive(Debug, Clone)]
pub struct SealingVault {
    keys: Arc<Keys>,
}

impl SealingVault {
    /// A vault that seals with `current` and opens with it and every key of `retired`.
    pub fn with_keys(current: SealKey, retired: Vec<SealKey>) -> Self {
        let mut ring = vec![current];
        ring.extend(retired);
        Self {
            keys: Arc::new(Keys::Ring(ring)),
        }
    }

    /// A vault whose key lies in the file `path`, made (32 random bytes, mode 0600) the first
    /// time a seed is sealed: the embedded mode's.
    pub fn with_key_file(path: PathBuf) -> Self {
        Self {
            keys: Arc::new(Keys::File {
                path,
                loaded: Mutex::new(None),
            }),
        }
    }

    /// A vault without a key: seeds are drawn, never sealed (no draw drop can be created).
    pub fn unconfigured() -> Self {
        Self {
            keys: Arc::new(Keys::None),
        }
    }

    fn sealing_key(&self) -> Result<SealKey, SealError> {
        match self.keys.as_ref() {
            Keys::None => Err(SealError::NotConfigured),
            Keys::Ring(ring) => ring.first().cloned().ok_or(SealError::NotConfigured),
            Keys::File { path, loaded } => Ok(file_key(path, loaded, true)?),
        }
    }

    fn key(&self, id: &str) -> Result<SealKey, InfraError> {
        let found = match self.keys.as_ref() {
            Keys::None => None,
            Keys::Ring(ring) => ring.iter().find(|k| k.id == id).cloned(),
            Keys::File { path, loaded } => {
                Some(file_key(path, loaded, false)?).filter(|k| k.id == id)
            }
        };
        found.ok_or_else(|| {
            InfraError::msg(format!(
                "the seal key {id} that sealed this draw's seed is not configured (DRAW_SEAL_KEY)"
            ))
        })
    }
}

fn file_key(
    path: &std::path::Path,
    loaded: &Mutex<Option<SealKey>>,
    make: bool,
) -> Result<SealKey, InfraError> {
    let mut loaded = loaded
        .lock()
        .map_err(|_| InfraError::msg("seal key lock poisoned"))?;
    if let Some(key) = loaded.as_ref() {
        return Ok(key.clone());
    }
    let key = match std::fs::read_to_string(path) {
        Ok(text) => parse_key(text.trim())
            .map_err(|e| InfraError::msg(format!("{}: {e}", path.display())))?,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound && make => {
            let bytes = random::<32>()?;
            write_private(path, &base64_encode(&bytes))
                .map_err(|e| InfraError::msg(format!("{}: {e}", path.display())))?;
            tracing::warn!(
                path = %path.display(),
                "made a draw seal key beside the database: keep it with the database and out of its backups, or set DRAW_SEAL_KEY"
            );
            SealKey::from_bytes(&bytes)
        }
        Err(error) => {
            return Err(InfraError::msg(format!(
                "draw seal key {}: {error}",
                path.display()
            )));
        }
    };
    *loaded = Some(key.clone());
    Ok(key)
}

fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    writeln!(file, "{text}")?;
    file.sync_all()
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A seal key from its base64 text (32 bytes).
pub fn parse_key(text: &str) -> Result<SealKey, String> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| format!("not base64: {e}"))?;
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|b: Vec<u8>| format!("must be 32 bytes, is {}", b.len()))?;
    Ok(SealKey::from_bytes(&bytes))
}

fn random<const N: usize>() -> Result<[u8; N], InfraError> {
    let mut bytes = [0_u8; N];
    // The kernel's generator does not fail once the system has booted; if it ever did, the
    // drop is not created rather than drawn from a weak seed.
    getrandom::fill(&mut bytes)
        .map_err(|error| InfraError::msg(format!("no randomness for a draw seed: {error}")))?;
    Ok(bytes)
}

impl SeedVault for SealingVault {
    fn seed(&self) -> Result<DrawSeed, InfraError> {
        random::<32>().map(DrawSeed::from_bytes)
    }

    fn seal(
        &self,
        drop: DropId,
        seed: &DrawSeed,
        commitment: &DrawCommitment,
    ) -> Result<SealedSeed, SealError> {
        let key = self.sealing_key()?;
        let mut sealed = vec![BOUND_TO_DROP];
        sealed.extend(key.seal_bytes(seed.bytes(), &bound(drop, commitment), "a draw seed")?);
        Ok(SealedSeed {
            key_id: key.id.clone(),
            sealed,
        })
    }

    fn open(
        &self,
        drop: DropId,
        sealed: &SealedSeed,
        commitment: &DrawCommitment,
    ) -> Result<DrawSeed, InfraError> {
        let key = self.key(&sealed.key_id)?;
        let (body, aad) = match sealed.sealed.split_first() {
            Some((&BOUND_TO_DROP, rest)) if rest.len() == FIRST_LAYOUT_LEN => {
                (rest, bound(drop, commitment))
            }
            _ if sealed.sealed.len() == FIRST_LAYOUT_LEN => {
                (sealed.sealed.as_slice(), commitment.bytes().to_vec())
            }
            _ => return Err(InfraError::msg("a sealed draw seed has no known layout")),
        };
        let bytes = key.open_bytes::<32>(body, &aad, "a sealed draw seed")?;
        let seed = DrawSeed::from_bytes(bytes);
        if !seed.opens(commitment) {
            return Err(InfraError::msg(
                "a sealed draw seed does not match its commitment",
            ));
        }
        Ok(seed)
    }
}

/// The associated data of a webhook secret's seal: the endpoint's id.
fn bound_to_endpoint(endpoint: EndpointId) -> Vec<u8> {
    let mut aad = b"goods webhook secret v1\0".to_vec();
    aad.extend(endpoint.get().to_be_bytes());
    aad
}

/// Endpoints' secrets, sealed under the same keys as draw seeds (`DRAW_SEAL_KEY`, or the
/// embedded mode's key file), bound to their endpoint.
impl SecretVault for SealingVault {
    fn secret(&self) -> Result<WebhookSecret, InfraError> {
        random::<32>().map(WebhookSecret::from_bytes)
    }

    fn seal_secret(
        &self,
        endpoint: EndpointId,
        secret: &WebhookSecret,
    ) -> Result<SealedSecret, SealError> {
        let key = self.sealing_key()?;
        let sealed = key.seal_bytes(
            secret.bytes(),
            &bound_to_endpoint(endpoint),
            "a webhook secret",
        )?;
        Ok(SealedSecret {
            key_id: key.id.clone(),
            sealed,
        })
    }

    fn open_secret(
        &self,
        endpoint: EndpointId,
        sealed: &SealedSecret,
    ) -> Result<WebhookSecret, InfraError> {
        let key = self.key(&sealed.key_id)?;
        let bytes = key.open_bytes::<32>(
            &sealed.sealed,
            &bound_to_endpoint(endpoint),
            "a sealed webhook secret",
        )?;
        Ok(WebhookSecret::from_bytes(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhook_secret_opens_for_its_endpoint_alone_and_with_its_key() {
        let secret = vault(1).secret().unwrap();
        assert_ne!(secret, vault(1).secret().unwrap(), "fresh each time");
        let endpoint = EndpointId::parse(5).unwrap();
        let sealed = vault(1).seal_secret(endpoint, &secret).unwrap();
        assert!(
            !sealed.sealed.windows(32).any(|w| w == secret.bytes()),
            "not in the clear"
        );
        assert_eq!(vault(1).open_secret(endpoint, &sealed).unwrap(), secret);
        assert!(
            vault(1)
                .open_secret(EndpointId::parse(6).unwrap(), &sealed)
                .is_err()
        );
        assert!(vault(2).open_secret(endpoint, &sealed).is_err());
        let rotated = SealingVault::with_keys(
            SealKey::from_bytes(&[2; 32]),
            vec![SealKey::from_bytes(&[1; 32])],
        );
        assert_eq!(rotated.open_secret(endpoint, &sealed).unwrap(), secret);
        assert!(matches!(
            SealingVault::unconfigured().seal_secret(endpoint, &secret),
            Err(SealError::NotConfigured)
        ));
    }

    fn vault(n: u8) -> SealingVault {
        SealingVault::with_keys(SealKey::from_bytes(&[n; 32]), Vec::new())
    }

    fn drop(id: i64) -> DropId {
        DropId::parse(id).unwrap()
    }

    #[test]
    fn every_seed_is_fresh() {
        let seeds: std::collections::HashSet<String> = (0..100)
            .map(|_| vault(1).seed().unwrap().to_hex())
            .collect();
        assert_eq!(seeds.len(), 100);
    }

    #[test]
    fn a_sealed_seed_opens_with_its_key_drop_and_commitment_only_and_shows_no_trace_of_it() {
        let v = vault(1);
        let seed = v.seed().unwrap();
        let commitment = seed.commitment();
        let sealed = v.seal(drop(7), &seed, &commitment).unwrap();
        assert_eq!(sealed.sealed.len(), 1 + NONCE_LEN + 32 + 16);
        assert!(
            !sealed
                .sealed
                .windows(8)
                .any(|w| seed.bytes().windows(8).any(|s| s == w))
        );
        assert_eq!(v.open(drop(7), &sealed, &commitment).unwrap(), seed);
        assert!(
            vault(2).open(drop(7), &sealed, &commitment).is_err(),
            "another key"
        );
        let other = v.seed().unwrap().commitment();
        assert!(
            v.open(drop(7), &sealed, &other).is_err(),
            "another commitment"
        );
        assert!(
            v.open(drop(8), &sealed, &commitment).is_err(),
            "copied, with its commitment, into another drop's row"
        );
        let again = v.seal(drop(7), &seed, &commitment).unwrap();
        assert_ne!(again.sealed, sealed.sealed, "a fresh nonce each time");
    }

    #[test]
    fn after_a_rotation_old_seeds_still_open_and_new_ones_use_the_new_key() {
        let old = vault(1);
        let seed = old.seed().unwrap();
        let sealed = old.seal(drop(1), &seed, &seed.commitment()).unwrap();
        let rotated = SealingVault::with_keys(
            SealKey::from_bytes(&[2; 32]),
            vec![SealKey::from_bytes(&[1; 32])],
        );
        assert_eq!(
            rotated.open(drop(1), &sealed, &seed.commitment()).unwrap(),
            seed
        );
        let new = rotated.seal(drop(1), &seed, &seed.commitment()).unwrap();
        assert_ne!(new.key_id, sealed.key_id);
        assert!(old.open(drop(1), &new, &seed.commitment()).is_err());
    }

    #[test]
    fn without_a_key_nothing_is_sealed() {
        let v = SealingVault::unconfigured();
        let seed = v.seed().unwrap();
        assert!(matches!(
            v.seal(drop(1), &seed, &seed.commitment()),
            Err(SealError::NotConfigured)
        ));
    }

    #[test]
    fn the_embedded_key_file_is_made_once_private_and_read_back() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("seal-key-{}", std::process::id()));
        let path = dir.join("draw-seal.key");
        let _ = std::fs::remove_file(&path);
        let first = SealingVault::with_key_file(path.clone());
        let seed = first.seed().unwrap();
        assert!(!path.exists(), "made on first use, not before");
        let sealed = first.seal(drop(1), &seed, &seed.commitment()).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let restarted = SealingVault::with_key_file(path.clone());
        assert_eq!(
            restarted
                .open(drop(1), &sealed, &seed.commitment())
                .unwrap(),
            seed
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A seed sealed before the drop's id was bound (its commitment alone as associated data,
    /// no version byte) still opens, for any drop id: the database's refusal to replace or
    /// delete a draw's row is what keeps such a seal where it was written.
    #[test]
    fn a_seed_sealed_in_the_first_layout_opens_against_its_commitment() {
        let key = SealKey::from_bytes(&[1; 32]);
        let seed = vault(1).seed().unwrap();
        let commitment = seed.commitment();
        let nonce = [9; NONCE_LEN];
        let mut first = nonce.to_vec();
        first.extend(
            key.cipher
                .encrypt(
                    Nonce::from_slice(&nonce),
                    Payload {
                        msg: seed.bytes(),
                        aad: commitment.bytes(),
                    },
                )
                .unwrap(),
        );
        let sealed = SealedSeed {
            key_id: key.id().to_owned(),
            sealed: first,
        };
        assert_eq!(vault(1).open(drop(3), &sealed, &commitment).unwrap(), seed);
    }
}
