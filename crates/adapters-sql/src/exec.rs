//! What the store's queries need from a connection, whichever backend it is: run a statement,
//! load rows. Every statement is a [`Sql`], so the store is written once, generic over
//! [`Exec`], and each backend's connection type implements it here.

use crate::raw::Sql;
use async_trait::async_trait;
use diesel::QueryResult;
use diesel::QueryableByName;
use diesel::mysql::Mysql;
use diesel::sqlite::{Sqlite, SqliteConnection};
use diesel_async::RunQueryDsl;
use diesel_async::sync_connection_wrapper::SyncConnectionWrapper;

/// A row every backend can load (the `QueryableByName` derive covers both).
pub trait Row: QueryableByName<Mysql> + QueryableByName<Sqlite> + Send + 'static {}

impl<T> Row for T where T: QueryableByName<Mysql> + QueryableByName<Sqlite> + Send + 'static {}

/// A connection the store can use.
#[async_trait]
pub trait Exec: Send {
    /// Runs `q`; the rows it changed (found, on MySQL: see DEPENDENCIES' note on found rows).
    async fn run(&mut self, q: Sql) -> QueryResult<usize>;

    async fn rows<R: Row>(&mut self, q: Sql) -> QueryResult<Vec<R>>;
}

macro_rules! exec_for {
    ($conn:ty) => {
        #[async_trait]
        impl Exec for $conn {
            async fn run(&mut self, q: Sql) -> QueryResult<usize> {
                q.execute(self).await
            }

            async fn rows<R: Row>(&mut self, q: Sql) -> QueryResult<Vec<R>> {
                q.load(self).await
            }
        }
    };
}

#[cfg(feature = "mysql")]
exec_for!(diesel_async::AsyncMysqlConnection);
exec_for!(SyncConnectionWrapper<SqliteConnection>);
