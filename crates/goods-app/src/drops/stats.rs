//! GetDropStats (FR-9).

use super::Drops;
use crate::{Actor, DropReadError};
use goods_domain::ports::{DropUnits, OutcomeCounts, UnitsByStatus, units_in_all};
use goods_domain::{DropId, Sku};

/// A drop's counters and its sold and remaining units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropStats {
    pub drop_id: DropId,
    pub counts: OutcomeCounts,
    pub sold_quantity: u32,
    pub remaining: u32,
    /// Units of the drop's orders by state (database), in all and each size's.
    pub units: DropUnits,
    /// A draw drop's entries, winners and promotions.
    pub draw: Option<goods_domain::DrawCounts>,
    /// A drop in sizes: each size's outcome counters, sold and remaining units (empty
    /// without sizes).
    pub sizes: Vec<SizeStats>,
}

/// One size's units in a drop's stats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeStats {
    pub sku: Sku,
    /// Outcomes of purchases of this size.
    pub counts: OutcomeCounts,
    /// Units of its orders by state (database).
    pub units: UnitsByStatus,
    pub sold_quantity: u32,
    pub remaining: u32,
}

impl Drops {
    /// A drop's outcome counters and units, for its seller or an admin (`NotFound` to others).
    #[tracing::instrument(skip_all, fields(drop.id = %id))]
    pub async fn stats(&self, id: DropId, actor: Actor) -> Result<DropStats, DropReadError> {
        let drop = self
            .managed(id, actor)
            .await?
            .ok_or(DropReadError::NotFound)?;
        let counts = self.stats.counts(id).await?;
        let sold = self.drops.sold_by_size(id).await?;
        let units = self.orders.units_by_status(id).await?;
        let remaining = self.core.remaining(&drop).await?;
        let sizes = drop
            .sizes
            .iter()
            .filter_map(|size| {
                let sku = size.sku.clone()?;
                Some(SizeStats {
                    counts: counts.of(&sku),
                    units: units.of(&sku),
                    sku,
                    sold_quantity: sold.get(&size.sku).copied().unwrap_or(0),
                    remaining: remaining.get(&size.sku).copied().unwrap_or(0),
                })
            })
            .collect();
        let draw = match drop.mode.is_draw() {
            true => Some(
                self.draws
                    .draw(id)
                    .await?
                    .map(|d| d.counts)
                    .unwrap_or_default(),
            ),
            false => None,
        };
        Ok(DropStats {
            draw,
            drop_id: id,
            counts: counts.all,
            sold_quantity: units_in_all(&sold),
            remaining: units_in_all(&remaining),
            units,
            sizes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drops::testing::DropMocks;
    use crate::test_support::*;

    #[tokio::test]
    async fn stats_add_the_databases_units_to_the_counters_and_units_left() {
        let mut m = DropMocks::new();
        m.stats.expect_counts().returning(|_| {
            Ok(goods_domain::ports::DropOutcomes {
                all: OutcomeCounts {
                    success: 7,
                    sold_out: 40,
                    ..OutcomeCounts::default()
                },
                sizes: Default::default(),
            })
        });
        m.drops
            .expect_sold_by_size()
            .returning(|_| Ok(goods_domain::ports::whole_units(9)));
        m.orders.expect_units_by_status().returning(|_| {
            Ok(DropUnits {
                all: UnitsByStatus {
                    pending: 4,
                    paid: 5,
                    cancelled: 1,
                    expired: 0,
                },
                sizes: Default::default(),
            })
        });
        m.core.checkpoint();
        m.core
            .expect_remaining()
            .times(1)
            .returning(|_| Ok(goods_domain::ports::whole_units(91)));
        m.draws.expect_draw().never();
        let stats = m.service().stats(drop_id(), admin()).await.unwrap();
        assert_eq!(
            (
                stats.counts.success,
                stats.counts.sold_out,
                stats.sold_quantity,
                stats.remaining
            ),
            (7, 40, 9, 91)
        );
        assert_eq!(stats.units.all.pending + stats.units.all.paid, 9);
        assert_eq!(stats.draw, None);
    }

    #[tokio::test]
    async fn another_sellers_drop_has_no_stats_and_nothing_is_counted() {
        let mut m = DropMocks::new();
        m.products.expect_get().returning(|_| Ok(None));
        m.stats.expect_counts().never();
        let err = m.service().stats(drop_id(), seller(7)).await.unwrap_err();
        assert!(matches!(err, DropReadError::NotFound), "{err:?}");
    }
}
