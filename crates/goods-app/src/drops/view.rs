//! GetLimitedDrop.

use super::Drops;
use crate::DrawView;
use goods_domain::{DropId, DropStatus, InfraError, LimitedDrop};
use time::OffsetDateTime;

/// A drop as clients see it, with its derived status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropView {
    pub drop: LimitedDrop,
    /// Its status at read time.
    pub status: DropStatus,
    pub remaining: u32,
    /// A draw drop's draw and counts.
    pub draw: Option<DrawView>,
    /// How long its orders hold their units unpaid: its own window, or the service's.
    pub payment_window: goods_domain::PaymentWindow,
}

impl DropView {
    /// The view of `drop` at `now` with `remaining` units left (and no draw); its orders'
    /// window is the drop's own or `default_window`.
    pub fn new(
        drop: LimitedDrop,
        now: OffsetDateTime,
        remaining: u32,
        default_window: goods_domain::PaymentWindow,
    ) -> Self {
        Self {
            status: drop.status(now, remaining),
            payment_window: drop.payment_window_or(default_window),
            drop,
            remaining,
            draw: None,
        }
    }

    #[must_use]
    pub fn with_draw(self, draw: Option<DrawView>) -> Self {
        Self { draw, ..self }
    }
}

/// Why a drop, or what is known of it (its stats, its reconciliation), could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DropReadError {
    #[error("drop not found")]
    NotFound,
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl Drops {
    /// Reads a drop with its units left and status (not found while `limited-drop.enabled` is
    /// off).
    #[tracing::instrument(skip_all, fields(drop.id = %id))]
    pub async fn get(&self, id: DropId) -> Result<DropView, DropReadError> {
        if !self.flags.drops_on() {
            return Err(DropReadError::NotFound);
        }
        let drop = self.cache.load(id).await?.ok_or(DropReadError::NotFound)?;
        self.view_of(drop).await.map_err(Into::into)
    }

    /// `drop` as clients see it now: units left, status, and a draw drop's draw.
    pub(crate) async fn view_of(&self, drop: LimitedDrop) -> Result<DropView, InfraError> {
        let remaining = self.core.remaining(&drop).await?;
        let draw = self.core.draw_view(&drop).await?;
        Ok(DropView::new(drop, self.clock.now(), remaining, self.payment_window).with_draw(draw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drops::testing::DropMocks;
    use crate::test_support::*;

    #[tokio::test]
    async fn a_drop_is_seen_with_the_cores_units_left_and_its_status_now() {
        let mut m = DropMocks::new();
        m.core.checkpoint();
        m.core.expect_remaining().times(1).returning(|_| Ok(0));
        m.core.expect_draw_view().times(1).returning(|_| Ok(None));
        let view = m.service().get(drop_id()).await.unwrap();
        assert_eq!(view.remaining, 0);
        assert_eq!(view.status, DropStatus::SoldOut);
    }

    #[tokio::test]
    async fn with_the_feature_off_no_drop_exists_and_no_store_is_read() {
        let mut m = DropMocks::new();
        m.drops.checkpoint();
        m.drops.expect_get().never();
        let drops = m.service();
        drops.flags.set_drops_on(false);
        assert!(matches!(
            drops.get(drop_id()).await,
            Err(DropReadError::NotFound)
        ));
    }
}
