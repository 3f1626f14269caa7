//! Every statement the store sends: SQL text with its binds, kept prepared by its text (diesel
//! never keeps a `sql_query` prepared: a prepare and a close per execution). A batch statement's
//! text depends on its row count, so it is cached up to [`CACHED_ROWS`] rows only.

use diesel::QueryResult;
use diesel::backend::Backend;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::serialize::ToSql;
use diesel::sql_types::{BigInt, Bool, HasSqlType, Integer, Nullable, Text, Timestamp, Untyped};
use time::PrimitiveDateTime;

/// Batches of up to this many rows are kept prepared; larger ones are prepared each time.
pub const CACHED_ROWS: usize = 64;

/// A value bound to a placeholder.
#[derive(Debug, Clone)]
pub enum Bind {
    BigInt(i64),
    Integer(i32),
    Text(String),
    Timestamp(PrimitiveDateTime),
    /// A timestamp or NULL.
    OptTimestamp(Option<PrimitiveDateTime>),
    /// A text or NULL.
    OptText(Option<String>),
    Bool(bool),
}

#[derive(Debug, Clone)]
enum Part {
    Sql(String),
    Bind(Bind),
}

/// SQL text with its binds in order; see the module documentation.
#[derive(Debug, Clone)]
pub struct Sql {
    parts: Vec<Part>,
    cached: bool,
}

impl Sql {
    /// A statement of fixed text (kept prepared).
    pub fn new(text: &str) -> Self {
        Self::for_rows(1).sql(text)
    }

    /// An empty statement for a batch of `rows` rows (which decides whether it is kept
    /// prepared).
    pub fn for_rows(rows: usize) -> Self {
        Self {
            parts: Vec::new(),
            cached: rows <= CACHED_ROWS,
        }
    }

    #[must_use]
    pub fn sql(mut self, text: &str) -> Self {
        self.parts.push(Part::Sql(text.to_owned()));
        self
    }

    /// Appends a placeholder bound to `value`.
    #[must_use]
    pub fn bind(mut self, value: Bind) -> Self {
        self.parts.push(Part::Bind(value));
        self
    }

    /// Appends the text and placeholders of `other`.
    #[must_use]
    pub fn append(mut self, other: Self) -> Self {
        self.parts.extend(other.parts);
        self.cached &= other.cached;
        self
    }

    /// Appends `items`, each written by `item`, with nothing in between.
    #[must_use]
    pub fn each<T>(
        mut self,
        items: impl IntoIterator<Item = T>,
        item: impl Fn(Self, T) -> Self,
    ) -> Self {
        for value in items {
            self = item(self, value);
        }
        self
    }

    /// Appends `items` separated by `", "`, each written by `item`.
    #[must_use]
    pub fn list<T>(
        self,
        items: impl IntoIterator<Item = T>,
        item: impl Fn(Self, T) -> Self,
    ) -> Self {
        self.each(items.into_iter().enumerate(), |q, (i, value)| {
            item(if i > 0 { q.sql(", ") } else { q }, value)
        })
    }
}

impl<DB> QueryFragment<DB> for Sql
where
    DB: Backend
        + HasSqlType<BigInt>
        + HasSqlType<Integer>
        + HasSqlType<Text>
        + HasSqlType<Timestamp>
        + HasSqlType<Bool>,
    i64: ToSql<BigInt, DB>,
    i32: ToSql<Integer, DB>,
    String: ToSql<Text, DB>,
    bool: ToSql<Bool, DB>,
    PrimitiveDateTime: ToSql<Timestamp, DB>,
    Option<PrimitiveDateTime>: ToSql<Nullable<Timestamp>, DB>,
    Option<String>: ToSql<Nullable<Text>, DB>,
{
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        if !self.cached {
            out.unsafe_to_cache_prepared();
        }
        for part in &self.parts {
            match part {
                Part::Sql(text) => out.push_sql(text),
                Part::Bind(Bind::BigInt(v)) => out.push_bind_param::<BigInt, _>(v)?,
                Part::Bind(Bind::Integer(v)) => out.push_bind_param::<Integer, _>(v)?,
                Part::Bind(Bind::Text(v)) => out.push_bind_param::<Text, _>(v)?,
                Part::Bind(Bind::Timestamp(v)) => out.push_bind_param::<Timestamp, _>(v)?,
                Part::Bind(Bind::OptTimestamp(v)) => {
                    out.push_bind_param::<Nullable<Timestamp>, _>(v)?;
                }
                Part::Bind(Bind::OptText(v)) => out.push_bind_param::<Nullable<Text>, _>(v)?,
                Part::Bind(Bind::Bool(v)) => out.push_bind_param::<Bool, _>(v)?,
            }
        }
        Ok(())
    }
}

impl QueryId for Sql {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl Query for Sql {
    type SqlType = Untyped;
}

#[cfg(test)]
mod tests {
    use super::*;
    use diesel::mysql::Mysql;
    use diesel::sqlite::Sqlite;

    fn rows(n: usize) -> Sql {
        Sql::for_rows(n)
            .sql("SELECT id FROM orders WHERE id IN (")
            .list(0..n, |q, i| q.bind(Bind::BigInt(i as i64)))
            .sql(")")
    }

    #[test]
    fn batches_up_to_the_cached_size_may_be_kept_prepared_and_larger_ones_not() {
        for (n, kept) in [(1, true), (CACHED_ROWS, true), (CACHED_ROWS + 1, false)] {
            assert_eq!(
                rows(n).is_safe_to_cache_prepared(&Mysql).unwrap(),
                kept,
                "{n}"
            );
            assert_eq!(
                rows(n).is_safe_to_cache_prepared(&Sqlite).unwrap(),
                kept,
                "{n}"
            );
        }
    }

    #[test]
    fn text_and_placeholders_come_out_in_order() {
        let sql = diesel::debug_query::<Mysql, _>(&rows(3)).to_string();
        assert!(
            sql.starts_with("SELECT id FROM orders WHERE id IN (?, ?, ?) -- binds: [0, 1, 2]"),
            "{sql}"
        );
    }
}
