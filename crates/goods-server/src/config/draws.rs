//! The seal key of draw seeds (`DRAW_SEAL_KEY` / `DRAW_SEAL_KEY_FILE`).

use super::{ConfigError, bad, secret};
use secrecy::{ExposeSecret as _, SecretString};
use std::path::PathBuf;

/// Where draw seeds' seal key comes from.
#[derive(Debug, Clone)]
pub enum DrawSeal {
    /// `DRAW_SEAL_KEY`: base64 keys of 32 bytes, comma-separated; the first seals new seeds,
    /// every one opens (a rotation keeps the retired keys after the new one).
    Keys(Vec<SecretString>),
    /// The embedded mode without a key: a key file beside the database, made on first use.
    File(PathBuf),
    /// No key: creating a draw drop answers 503 `DRAWS_NOT_CONFIGURED`.
    Off,
}

impl DrawSeal {
    pub(super) fn read(
        get: &impl Fn(&str) -> Option<String>,
        embedded_db: Option<&str>,
    ) -> Result<Self, ConfigError> {
        let Some(keys) = secret::read(get, "DRAW_SEAL_KEY", "DRAW_SEAL_KEY_FILE")? else {
            return Ok(match embedded_db {
                Some(url) => {
                    let db = PathBuf::from(url.trim_start_matches("sqlite://"));
                    let dir = db.parent().map(PathBuf::from).unwrap_or_default();
                    Self::File(dir.join("draw-seal.key"))
                }
                None => Self::Off,
            });
        };
        let keys: Vec<SecretString> = keys
            .expose_secret()
            .split(',')
            .map(|k| SecretString::from(k.trim().to_owned()))
            .collect();
        for key in &keys {
            secret::check_strength("DRAW_SEAL_KEY", key.expose_secret())?;
            adapters_memory::parse_seal_key(key.expose_secret()).map_err(|e| {
                bad(
                    "DRAW_SEAL_KEY",
                    format!("{e}; generate one with `openssl rand -base64 32`"),
                )
            })?;
        }
        Ok(Self::Keys(keys))
    }

    /// The vault these keys make.
    pub fn vault(&self) -> adapters_memory::SealingVault {
        use adapters_memory::{SealingVault, parse_seal_key};
        match self {
            Self::Keys(keys) => {
                let mut keys = keys
                    .iter()
                    .filter_map(|k| parse_seal_key(k.expose_secret()).ok());
                match keys.next() {
                    Some(current) => SealingVault::with_keys(current, keys.collect()),
                    None => SealingVault::unconfigured(),
                }
            }
            Self::File(path) => SealingVault::with_key_file(path.clone()),
            Self::Off => SealingVault::unconfigured(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(vars: &[(&str, &str)], embedded: Option<&str>) -> Result<DrawSeal, ConfigError> {
        let map: std::collections::HashMap<&str, &str> = vars.iter().copied().collect();
        DrawSeal::read(&|k| map.get(k).map(|v| (*v).to_owned()), embedded)
    }

    #[test]
    fn a_key_is_32_random_bytes_in_base64_and_several_rotate() {
        let a = "/sE5xCXnKg8oMl/1G9Y2o12bmv/QjJjvOTL94Q1JZK0=";
        let b = "Xj1q9Zb8lJ0kV3mP2sYc7uT4wE6rN5hG1aQ0dF8yK2o=";
        assert!(
            matches!(read(&[("DRAW_SEAL_KEY", b)], None).unwrap(), DrawSeal::Keys(k) if k.len() == 1)
        );
        let both = format!("{b},{a}");
        assert!(
            matches!(read(&[("DRAW_SEAL_KEY", &both)], None).unwrap(), DrawSeal::Keys(k) if k.len() == 2)
        );
        for bad in [
            "c2hvcnQ=",
            "change-me-change-me-change-me-change-me-00",
            "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        ] {
            assert_eq!(
                read(&[("DRAW_SEAL_KEY", bad)], None).unwrap_err().var,
                "DRAW_SEAL_KEY",
                "{bad}"
            );
        }
    }

    #[test]
    fn without_a_key_the_embedded_mode_keeps_one_beside_its_database_and_production_has_none() {
        assert!(matches!(
            read(&[], Some("sqlite://data/goods.db")).unwrap(),
            DrawSeal::File(p) if p.as_path() == std::path::Path::new("data/draw-seal.key")
        ));
        assert!(matches!(read(&[], None).unwrap(), DrawSeal::Off));
    }
}
