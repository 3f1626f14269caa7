//! Orders, read side.

use super::SqlStore;
use super::queries::ORDER_COLUMNS;
use crate::rows::{NumberRow, OrderRow, StatusUnitsRow, to_db};
use crate::{Backend, Bind, Sql};
use async_trait::async_trait;
use goods_domain::ports::{DropUnits, OrderQuery, OrderRepository};
use goods_domain::{
    DropId, Expiry, GoodsOrder, IdempotencyKey, InfraError, OrderId, OrderStatus, Sku, UserId,
};

fn select_orders() -> Sql {
    Sql::new(&format!("SELECT {ORDER_COLUMNS} FROM orders"))
}

impl<B: Backend> SqlStore<B> {
    async fn orders_where(
        &self,
        what: &'static str,
        q: Sql,
    ) -> Result<Vec<GoodsOrder>, InfraError> {
        self.read::<OrderRow>(what, q)
            .await?
            .into_iter()
            .map(OrderRow::into_domain)
            .collect()
    }
}

#[async_trait]
impl<B: Backend> OrderRepository for SqlStore<B> {
    async fn get(&self, id: OrderId) -> Result<Option<GoodsOrder>, InfraError> {
        let found = self
            .orders_where(
                "get order",
                select_orders()
                    .sql(" WHERE id = ")
                    .bind(Bind::BigInt(id.get())),
            )
            .await?;
        Ok(found.into_iter().next())
    }

    async fn find_by_key(
        &self,
        user: UserId,
        key: &IdempotencyKey,
    ) -> Result<Option<GoodsOrder>, InfraError> {
        let found = self
            .orders_where(
                "find order by key",
                select_orders()
                    .sql(" WHERE user_id = ")
                    .bind(Bind::BigInt(user.get()))
                    .sql(" AND idempotency_key = ")
                    .bind(Bind::Text(key.as_str().to_owned())),
            )
            .await?;
        Ok(found.into_iter().next())
    }

    async fn list_for_buyer(&self, query: &OrderQuery) -> Result<Vec<GoodsOrder>, InfraError> {
        let mut q = select_orders()
            .sql(" WHERE user_id = ")
            .bind(Bind::BigInt(query.user.get()));
        if let Some(drop) = query.drop {
            q = q.sql(" AND drop_id = ").bind(Bind::BigInt(drop.get()));
        }
        if let Some(status) = query.status {
            q = q
                .sql(" AND status = ")
                .bind(Bind::Text(status.as_str().to_owned()));
        }
        if let Some(before) = query.before {
            q = q.sql(" AND id < ").bind(Bind::BigInt(before.get()));
        }
        q = q
            .sql(" ORDER BY id DESC LIMIT ")
            .bind(Bind::BigInt(i64::from(query.limit)));
        self.orders_where("list orders", q).await
    }

    async fn overdue(&self, expiry: Expiry, limit: u32) -> Result<Vec<OrderId>, InfraError> {
        // Orders with a deadline past, and orders without one (made before deadlines were
        // stored, or by the previous release during a rollout) past the default window.
        let q = Sql::new("SELECT id AS n FROM orders WHERE status = ")
            .bind(Bind::Text(OrderStatus::Pending.as_str().to_owned()))
            .sql(" AND (expires_at <= ")
            .bind(Bind::Timestamp(to_db(expiry.now)))
            .sql(" OR (expires_at IS NULL AND created_at <= ")
            .bind(Bind::Timestamp(to_db(expiry.legacy_cutoff())))
            .sql(")) LIMIT ")
            .bind(Bind::BigInt(i64::from(limit)));
        let rows: Vec<NumberRow> = self.read("overdue orders", q).await?;
        rows.into_iter()
            .map(|r| OrderId::parse(r.n).map_err(|e| InfraError::new("corrupt order id", e)))
            .collect()
    }

    async fn units_by_status(&self, drop: DropId) -> Result<DropUnits, InfraError> {
        let rows: Vec<StatusUnitsRow> = self
            .read(
                "units by status",
                Sql::new(
                    "SELECT sku, status, CAST(COALESCE(SUM(quantity), 0) AS SIGNED) AS units \
                     FROM orders WHERE drop_id = ",
                )
                .bind(Bind::BigInt(drop.get()))
                .sql(" GROUP BY sku, status"),
            )
            .await?;
        let mut units = DropUnits::default();
        for row in rows {
            let status = OrderStatus::parse(&row.status)
                .ok_or_else(|| InfraError::msg(format!("corrupt order status {}", row.status)))?;
            let sku = row
                .sku
                .map(|s| Sku::parse("sku", &s))
                .transpose()
                .map_err(|e| InfraError::new("corrupt order sku", e))?;
            units.add(sku, status, u32::try_from(row.units).unwrap_or(u32::MAX));
        }
        Ok(units)
    }
}
