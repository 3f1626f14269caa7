//! Applying this release's migrations, all of them or in stages (`goods-server migrate --to`).

use diesel::backend::Backend;
use diesel::migration::MigrationSource;
use diesel_migrations::MigrationHarness;

/// The version diesel records for a migration named `name`: its directory's date and number
/// without the dashes (`2026-12-02-000001_products_owner_expand` → `20261202000001`). Accepts
/// the directory name, its version part with dashes, or diesel's form.
pub fn version_of(name: &str) -> String {
    let version = name.split_once('_').map_or(name, |(version, _)| version);
    version.chars().filter(|c| *c != '-').collect()
}

/// Runs the missing migrations of `source` in order, with `to` only up to it (expand now,
/// contract later), returning the versions applied.
///
/// # Errors
/// An unknown `to`, or a failure; those applied before it stay applied and recorded.
pub fn apply_migrations<DB, H, S>(
    harness: &mut H,
    source: &S,
    to: Option<&str>,
) -> anyhow::Result<Vec<String>>
where
    DB: Backend,
    H: MigrationHarness<DB>,
    S: MigrationSource<DB>,
{
    let mut all = source.migrations().map_err(|e| anyhow::anyhow!("{e}"))?;
    all.sort_by_key(|m| m.name().version().to_string());
    let last = match to {
        None => None,
        Some(name) => {
            let wanted = version_of(name);
            if !all.iter().any(|m| m.name().version().to_string() == wanted) {
                let known: Vec<String> = all.iter().map(|m| m.name().to_string()).collect();
                anyhow::bail!(
                    "--to {name}: no such migration in this release (it has {})",
                    known.join(", ")
                );
            }
            Some(wanted)
        }
    };
    // Also creates diesel's table of applied migrations on a new database.
    let done: Vec<String> = harness
        .applied_migrations()
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .iter()
        .map(ToString::to_string)
        .collect();
    let pending = all
        .into_iter()
        .filter(|m| !done.contains(&m.name().version().to_string()));
    let mut applied = Vec::new();
    for migration in pending {
        let version = migration.name().version().to_string();
        if last.as_ref().is_some_and(|last| version > *last) {
            break;
        }
        harness
            .run_migration(&*migration)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        tracing::debug!(migration = %migration.name(), "migration applied");
        applied.push(migration.name().to_string());
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::version_of;

    #[test]
    fn a_migration_is_named_by_its_directory_its_dated_version_or_diesels_version() {
        for name in [
            "2026-12-02-000001_products_owner_expand",
            "2026-12-02-000001",
            "20261202000001",
        ] {
            assert_eq!(version_of(name), "20261202000001", "{name}");
        }
    }
}
