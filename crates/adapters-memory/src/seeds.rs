//! Draw seeds from the operating system's CSPRNG (`getrandom(2)` on Linux).

use goods_domain::ports::SeedSource;
use goods_domain::{DrawSeed, InfraError};

/// 32 bytes from the operating system's CSPRNG for every seed.
#[derive(Debug, Clone, Copy, Default)]
pub struct OsSeeds;

impl SeedSource for OsSeeds {
    fn seed(&self) -> Result<DrawSeed, InfraError> {
        let mut bytes = [0_u8; 32];
        // The kernel's generator does not fail once the system has booted; if it ever did,
        // the drop is not created rather than drawn from a weak seed.
        getrandom::fill(&mut bytes)
            .map_err(|error| InfraError::msg(format!("no randomness for a draw seed: {error}")))?;
        Ok(DrawSeed::from_bytes(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_seed_is_fresh() {
        let seeds: std::collections::HashSet<String> =
            (0..100).map(|_| OsSeeds.seed().unwrap().to_hex()).collect();
        assert_eq!(seeds.len(), 100);
    }
}
