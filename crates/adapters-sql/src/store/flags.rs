//! Runtime feature flags that were set (a flag without a row is on).

use super::SqlStore;
use crate::rows::{FlagRow, from_db, to_db};
use crate::{Backend, Bind, Exec, Sql, TxError};
use async_trait::async_trait;
use goods_domain::ports::{Flag, FlagName, FlagStore};
use goods_domain::{InfraError, UserId};
use time::OffsetDateTime;

#[async_trait]
impl<B: Backend> FlagStore for SqlStore<B> {
    async fn flags(&self) -> Result<Vec<Flag>, InfraError> {
        let rows: Vec<FlagRow> = self
            .read(
                "read flags",
                Sql::new("SELECT name, enabled, updated_at, updated_by FROM feature_flags"),
            )
            .await?;
        // A row of a flag this release does not know (a newer release wrote it) is skipped.
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                Some(Flag {
                    name: FlagName::parse(&row.name)?,
                    enabled: row.enabled,
                    updated_at: Some(from_db(row.updated_at)),
                    updated_by: UserId::parse(row.updated_by).ok(),
                })
            })
            .collect())
    }

    async fn set_flag(
        &self,
        name: FlagName,
        enabled: bool,
        by: UserId,
        at: OffsetDateTime,
    ) -> Result<Flag, InfraError> {
        let at_db = to_db(at);
        // Update, else insert (portable); two racing first sets retry on the duplicate key.
        self.write_tx::<_, std::convert::Infallible, InfraError, _>(
            "set flag",
            |e| matches!(e, TxError::Db(db) if super::duplicate_key(db)),
            move |c, _| {
                Box::pin(async move {
                    let updated = c
                        .run(
                            Sql::new("UPDATE feature_flags SET enabled = ")
                                .bind(Bind::Bool(enabled))
                                .sql(", updated_at = ")
                                .bind(Bind::Timestamp(at_db))
                                .sql(", updated_by = ")
                                .bind(Bind::BigInt(by.get()))
                                .sql(" WHERE name = ")
                                .bind(Bind::Text(name.as_str().to_owned())),
                        )
                        .await?;
                    if updated == 0 {
                        c.run(
                            Sql::new(
                                "INSERT INTO feature_flags (name, enabled, updated_at, updated_by) \
                                 VALUES (",
                            )
                            .bind(Bind::Text(name.as_str().to_owned()))
                            .sql(", ")
                            .bind(Bind::Bool(enabled))
                            .sql(", ")
                            .bind(Bind::Timestamp(at_db))
                            .sql(", ")
                            .bind(Bind::BigInt(by.get()))
                            .sql(")"),
                        )
                        .await?;
                    }
                    Ok(())
                })
            },
        )
        .await?;
        Ok(Flag {
            name,
            enabled,
            updated_at: Some(from_db(at_db)),
            updated_by: Some(by),
        })
    }

    async fn set_flag_if_unset(
        &self,
        name: FlagName,
        enabled: bool,
        at: OffsetDateTime,
    ) -> Result<Flag, InfraError> {
        // `updated_by` 0: set by the configuration, not by a user.
        let mut conn = self.conn().await?;
        conn.run(
            Sql::new(B::DIALECT.insert_ignore)
                .sql(" feature_flags (name, enabled, updated_at, updated_by) VALUES (")
                .bind(Bind::Text(name.as_str().to_owned()))
                .sql(", ")
                .bind(Bind::Bool(enabled))
                .sql(", ")
                .bind(Bind::Timestamp(to_db(at)))
                .sql(", 0)"),
        )
        .await
        .map_err(|e| crate::db_failure("set flag if unset", e, B::unavailable))?;
        drop(conn);
        self.flags()
            .await?
            .into_iter()
            .find(|flag| flag.name == name)
            .ok_or_else(|| InfraError::msg("a flag set if unset was not read back"))
    }
}
