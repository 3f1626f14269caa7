//! The pool ([`pool`]: deadpool, last in first out), and a pooled connection that never goes
//! back to the pool inside a transaction: one dropped half-way still holds row locks, which
//! deadpool would discard only at the next checkout; this guard closes it at once, so the server
//! rolls back and releases them.

use deadpool::managed::{BuildError, Manager, Object, Pool, QueueMode};
use diesel_async::pooled_connection::PoolableConnection;
use goods_domain::InfraError;
use std::ops::{Deref, DerefMut};
use std::time::Duration;

/// A pool of up to `max_size` connections of `manager` that hands out the connection given back
/// last. Each connection keeps its own prepared statements, and a batch statement's text
/// depends on its row count, so handing the connections out in turn (deadpool's default) would
/// prepare every text on every connection; this way the connection in use stays the one in
/// use, with its statements prepared, and the others rest.
///
/// # Errors
/// deadpool's, for a pool it cannot build.
pub fn pool<M: Manager>(manager: M, max_size: usize) -> Result<Pool<M>, BuildError> {
    Pool::builder(manager)
        .max_size(max_size)
        .queue_mode(QueueMode::Lifo)
        .build()
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
    pub fn discard(mut self) {
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
