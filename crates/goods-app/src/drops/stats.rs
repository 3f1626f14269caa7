//! GetDropStats (FR-9).

use crate::{Actor, DropReadError, GoodsApp};
use goods_domain::DropId;
use goods_domain::ports::{OutcomeCounts, UnitsByStatus};

/// A drop's counters and its sold and remaining units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropStats {
    pub drop_id: DropId,
    pub counts: OutcomeCounts,
    pub sold_quantity: u32,
    pub remaining: u32,
    /// Units of the drop's orders by state (database).
    pub units: UnitsByStatus,
    /// A draw drop's entries, winners and promotions.
    pub draw: Option<goods_domain::DrawCounts>,
}

impl GoodsApp {
    /// Reads a drop's outcome counters and units, for the seller of its product or an admin.
    ///
    /// # Errors
    /// [`DropReadError::NotFound`] (also for a drop `actor` does not manage), or `Infra`
    /// when a store fails.
    #[tracing::instrument(skip_all, fields(drop.id = %id))]
    pub async fn drop_stats(&self, id: DropId, actor: Actor) -> Result<DropStats, DropReadError> {
        let drop = self
            .managed_drop(id, actor)
            .await?
            .ok_or(DropReadError::NotFound)?;
        let counts = self.ports.stats.counts(id).await?;
        let sold_quantity = self.ports.drops.sold_quantity(id).await?;
        let units = self.ports.orders.units_by_status(id).await?;
        let remaining = self.remaining(&drop).await?;
        let draw = match drop.mode.is_draw() {
            true => Some(
                self.ports
                    .draws
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
            counts,
            sold_quantity,
            remaining,
            units,
        })
    }
}
