//! The pool: deadpool, last in first out, its connections verified only after they sat idle
//! ([`pool`]); and a pooled connection that never goes back to the pool inside a transaction:
//! one dropped half-way still holds row locks, which deadpool would discard only at the next
//! checkout; this guard closes it at once, so the server rolls back and releases them.

use deadpool::managed::{
    BuildError, Manager, Metrics, Object, Pool, QueueMode, RecycleError, RecycleResult,
};
use diesel_async::pooled_connection::PoolableConnection;
use goods_domain::InfraError;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::time::Duration;

/// A connection handed out again within this long of its last checkout is not sent the
/// manager's test query (diesel-async's `SELECT 1`), only checked for a broken transaction.
pub const VERIFY_AFTER_IDLE: Duration = Duration::from_secs(1);

/// A backend's pool of `M`'s connections; see [`pool`].
pub type ConnPool<M> = Pool<VerifiedWhenIdle<M>>;

/// A pool of up to `max_size` connections of `manager`, handing out the connection returned
/// last (its statements are prepared: a batch statement's text depends on its row count, and
/// first in first out would prepare every text on every connection), each verified by the
/// manager's test query only when `verify_after` has passed since its last checkout: a
/// connection in use during a sale goes straight back to work, one that sat idle (a restarted
/// server, a dropped idle connection) is tested and replaced before anyone uses it.
///
/// # Errors
/// deadpool's, for a pool it cannot build.
pub fn pool<M: Manager>(
    manager: M,
    max_size: usize,
    verify_after: Duration,
) -> Result<ConnPool<M>, BuildError>
where
    M::Type: PoolableConnection,
{
    Pool::builder(VerifiedWhenIdle {
        inner: manager,
        after: verify_after,
    })
    .max_size(max_size)
    .queue_mode(QueueMode::Lifo)
    .build()
}

/// `M`, verifying a connection only when it was last checked out `after` ago or longer; see
/// [`pool`].
pub struct VerifiedWhenIdle<M> {
    inner: M,
    after: Duration,
}

impl<M: Manager> Manager for VerifiedWhenIdle<M>
where
    M::Type: PoolableConnection,
{
    type Type = M::Type;
    type Error = M::Error;

    fn create(&self) -> impl Future<Output = Result<M::Type, M::Error>> + Send {
        self.inner.create()
    }

    fn recycle(
        &self,
        conn: &mut M::Type,
        metrics: &Metrics,
    ) -> impl Future<Output = RecycleResult<M::Error>> + Send {
        let recent = metrics.last_used() < self.after;
        async move {
            if !recent {
                return self.inner.recycle(conn, metrics).await;
            }
            if std::thread::panicking() || conn.is_broken() {
                return Err(RecycleError::Message("broken connection".into()));
            }
            Ok(())
        }
    }

    fn detach(&self, conn: &mut M::Type) {
        self.inner.detach(conn);
    }
}

/// A connection from the pool; see the module documentation.
pub struct PooledConn<M: Manager>(Option<Object<M>>)
where
    M::Type: PoolableConnection;

impl<M: Manager> PooledConn<M>
where
    M::Type: PoolableConnection,
    M::Error: std::fmt::Display,
{
    /// A connection from `pool` within `wait`, else [`InfraError::unavailable`].
    pub async fn get(
        pool: &Pool<M>,
        wait: Duration,
        what: &'static str,
    ) -> Result<Self, InfraError> {
        match tokio::time::timeout(wait, pool.get()).await {
            Ok(Ok(conn)) => Ok(Self(Some(conn))),
            Ok(Err(error)) => Err(InfraError::unavailable(format!("{what}: {error}"))),
            Err(_) => Err(InfraError::unavailable(format!(
                "{what}: no connection within {} ms",
                wait.as_millis()
            ))),
        }
    }

    /// When the pool opened this connection.
    pub fn created(&self) -> std::time::Instant {
        #[allow(clippy::expect_used)] // only `Drop` and `discard` empty the option
        Object::metrics(self.0.as_ref().expect("connection present until drop")).created
    }

    /// Closes this connection and takes it out of the pool: the next checkout opens a fresh one
    /// in its place.
    pub fn discard(self) {
        Discard::discard(self);
    }
}

/// A checked-out connection that can be closed instead of given back to its pool.
pub trait Discard {
    /// Closes the connection and takes it out of its pool.
    fn discard(self);
}

impl<M: Manager> Discard for PooledConn<M>
where
    M::Type: PoolableConnection,
{
    fn discard(mut self) {
        if let Some(conn) = self.0.take() {
            drop(Object::take(conn));
        }
    }
}

impl<M: Manager> Deref for PooledConn<M>
where
    M::Type: PoolableConnection,
{
    type Target = M::Type;

    fn deref(&self) -> &M::Type {
        // Only `Drop` empties the option.
        #[allow(clippy::expect_used)]
        self.0.as_ref().expect("connection present until drop")
    }
}

impl<M: Manager> DerefMut for PooledConn<M>
where
    M::Type: PoolableConnection,
{
    fn deref_mut(&mut self) -> &mut M::Type {
        #[allow(clippy::expect_used)]
        self.0.as_mut().expect("connection present until drop")
    }
}

impl<M: Manager> Drop for PooledConn<M>
where
    M::Type: PoolableConnection,
{
    fn drop(&mut self) {
        if let Some(mut conn) = self.0.take()
            && conn.is_broken()
        {
            // Out of the pool and closed: the server rolls the open transaction back.
            drop(Object::take(conn));
        }
    }
}
