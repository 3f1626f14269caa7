//! The SQL source of truth, written once: [`SqlStore`] implements every port over a
//! [`Backend`] (one file per port under `store/`), every statement a [`Sql`] through [`Exec`];
//! a backend crate adds only its pool, dialect and error reading. Transactions go through
//! [`SqlStore::write_tx`] (retried on deadlocks and lock waits, bounded by the transaction
//! limit); a store function reads, calls goods-domain's rule, and writes what it decided.

mod batch;
mod draws;
mod drops;
mod event_log;
mod flags;
mod leases;
mod ledger;
mod lifecycle;
mod orders;
mod outbox;
mod payments;
mod products;
mod queries;
mod webhooks;

use crate::{Backend, Exec, Sql, TxError, bounded, db_failure, retry_when};
use diesel::result::Error as DbError;
use diesel_async::AsyncConnection;
use futures::future::BoxFuture;
use goods_domain::InfraError;
use std::marker::PhantomData;

/// Every port, over the backend `B`.
pub struct SqlStore<B> {
    backend: std::sync::Arc<B>,
}

impl<B> Clone for SqlStore<B> {
    fn clone(&self) -> Self {
        Self {
            backend: std::sync::Arc::clone(&self.backend),
        }
    }
}

impl<B: Backend> SqlStore<B> {
    pub fn new(backend: B) -> Self {
        Self {
            backend: std::sync::Arc::new(backend),
        }
    }

    /// The backend (its pool and settings).
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Statements sent since the store was opened.
    pub fn statements(&self) -> u64 {
        self.backend.statements()
    }

    /// Whether the database answers, within the transaction limit.
    pub async fn ping(&self) -> Result<(), InfraError> {
        bounded(self.backend.bounds().transaction, "database ping", async {
            let mut conn = self.conn().await?;
            conn.run(Sql::new("SELECT 1"))
                .await
                .map(drop)
                .map_err(|e| InfraError::new("database ping", e))
        })
        .await
    }

    /// The database's identity: a random id its first migration of `store_identity` wrote.
    /// Whatever mirrors this database elsewhere (the gate's Redis keys) is named by it, so a
    /// database reset or restored, or another one sharing that place, never reads a mirror that
    /// is not its own.
    pub async fn identity(&self) -> Result<String, InfraError> {
        let rows: Vec<crate::rows::IdentityRow> = self
            .read(
                "database identity",
                Sql::new("SELECT identity FROM store_identity WHERE id = 1"),
            )
            .await?;
        rows.into_iter()
            .next()
            .map(|row| row.identity)
            .ok_or_else(|| InfraError::msg("database identity: store_identity is empty"))
    }

    /// The connection pool's state now (for the `db_pool_*` gauges).
    pub fn pool_status(&self) -> crate::PoolStatus {
        self.backend.pool_status()
    }

    pub(crate) async fn conn(&self) -> Result<B::Pooled, InfraError> {
        self.backend.conn().await
    }

    /// One read outside a transaction; `what` describes a failure.
    pub(crate) async fn read<R: crate::Row>(
        &self,
        what: &'static str,
        q: Sql,
    ) -> Result<Vec<R>, InfraError> {
        let mut conn = self.conn().await?;
        conn.rows(q)
            .await
            .map_err(|e| db_failure(what, e, B::unavailable))
    }

    /// One statement outside a transaction; the rows it changed.
    pub(crate) async fn write(&self, what: &'static str, q: Sql) -> Result<usize, InfraError> {
        let mut conn = self.conn().await?;
        conn.run(q)
            .await
            .map_err(|e| db_failure(what, e, B::unavailable))
    }

    /// Runs `body` in one transaction, retried after a jittered pause while the backend or
    /// `also` says a fresh one may succeed ([`crate::MAX_ATTEMPTS`], within the transaction
    /// limit). `Refused` rolls back as `E`; a failure is [`InfraError`].
    pub(crate) async fn write_tx<'a, T, R, E, F>(
        &self,
        what: &'static str,
        also: impl Fn(&TxError<R>) -> bool,
        body: F,
    ) -> Result<T, E>
    where
        T: Send,
        R: Send,
        E: From<InfraError> + From<R>,
        F: for<'c> Fn(&'c mut B::Conn, Borrows<'c, 'a>) -> BoxFuture<'c, Result<T, TxError<R>>>
            + Send
            + Sync
            + 'a,
    {
        let retryable =
            |e: &TxError<R>| matches!(e, TxError::Db(db) if B::retryable(db)) || also(e);
        let body = &body;
        bounded(self.backend.bounds().transaction, what, async {
            retry_when(retryable, || async {
                let mut conn = self.conn().await?;
                conn.transaction::<T, TxError<R>, _>(async |c| body(c, PhantomData).await)
                    .await
            })
            .await
            .map_err(|e| e.resolve::<E>(what, B::unavailable))
        })
        .await
    }
}

/// What a transaction's body may borrow: `'a` outlives the connection's `'c` (the type's being
/// well-formed says so, which lets the body's future hold data borrowed for `'a`).
pub(crate) type Borrows<'c, 'a> = PhantomData<&'c &'a ()>;

/// A duplicate key: a concurrent transaction committed the same unique value first.
pub(crate) fn duplicate_key(error: &DbError) -> bool {
    matches!(
        error,
        DbError::DatabaseError(diesel::result::DatabaseErrorKind::UniqueViolation, _)
    )
}
