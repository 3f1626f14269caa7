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

/// SQL text with its binds in order; see the module documentation. The text is kept whole,
/// each bind with the place in it where its placeholder stands, so building a statement of a
/// batch's rows allocates as its text grows, not once per fragment.
#[derive(Debug, Clone)]
pub struct Sql {
    text: String,
    binds: Vec<(usize, Bind)>,
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
            text: String::new(),
            binds: Vec::new(),
            cached: rows <= CACHED_ROWS,
        }
    }

    #[must_use]
    pub fn sql(mut self, text: &str) -> Self {
        self.text.push_str(text);
        self
    }

    /// Appends a placeholder bound to `value`.
    #[must_use]
    pub fn bind(mut self, value: Bind) -> Self {
        self.binds.push((self.text.len(), value));
        self
    }

    /// Appends the text and placeholders of `other`.
    #[must_use]
    pub fn append(mut self, other: Self) -> Self {
        let at = self.text.len();
        self.text.push_str(&other.text);
        self.binds
            .extend(other.binds.into_iter().map(|(i, value)| (at + i, value)));
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
        let mut from = 0;
        for (at, value) in &self.binds {
            out.push_sql(&self.text[from..*at]);
            from = *at;
            match value {
                Bind::BigInt(v) => out.push_bind_param::<BigInt, _>(v)?,
                Bind::Integer(v) => out.push_bind_param::<Integer, _>(v)?,
                Bind::Text(v) => out.push_bind_param::<Text, _>(v)?,
                Bind::Timestamp(v) => out.push_bind_param::<Timestamp, _>(v)?,
                Bind::OptTimestamp(v) => out.push_bind_param::<Nullable<Timestamp>, _>(v)?,
                Bind::OptText(v) => out.push_bind_param::<Nullable<Text>, _>(v)?,
                Bind::Bool(v) => out.push_bind_param::<Bool, _>(v)?,
            }
        }
        out.push_sql(&self.text[from..]);
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

    #[test]
    fn an_appended_statement_keeps_its_placeholders_where_they_stood() {
        let tail = Sql::new("b = ")
            .bind(Bind::BigInt(2))
            .sql(" OR c = ")
            .bind(Bind::BigInt(3));
        let sql = Sql::new("WHERE a = ")
            .bind(Bind::BigInt(1))
            .sql(" AND (")
            .append(tail)
            .sql(")")
            .bind(Bind::BigInt(4));
        assert_eq!(
            diesel::debug_query::<Mysql, _>(&sql).to_string(),
            "WHERE a = ? AND (b = ? OR c = ?)? -- binds: [1, 2, 3, 4]"
        );
    }
}
