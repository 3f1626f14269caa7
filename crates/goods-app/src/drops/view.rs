//! GetLimitedDrop.

use super::Drops;
use crate::DrawView;
use goods_domain::batch::FreeUnits;
use goods_domain::ports::units_in_all;
use goods_domain::{DropId, DropStatus, InfraError, LimitedDrop, Size};
use time::OffsetDateTime;

/// A drop as clients see it, with its derived status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropView {
    pub drop: LimitedDrop,
    /// Its status at read time.
    pub status: DropStatus,
    /// Units left in all sizes.
    pub remaining: u32,
    /// A drop in sizes: each size with its units left and status (empty without sizes).
    pub sizes: Vec<SizeView>,
    /// A draw drop's draw and counts.
    pub draw: Option<DrawView>,
    /// How long its orders hold their units unpaid: its own window, or the service's.
    pub payment_window: goods_domain::PaymentWindow,
}

/// One size of a drop as clients see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeView {
    pub size: Size,
    pub remaining: u32,
    /// `SoldOut` when it has none left, else the drop's.
    pub status: DropStatus,
}

impl DropView {
    /// The view of `drop` at `now` with `remaining` units left per size (and no draw); its
    /// orders' window is the drop's own or `default_window`. The drop is sold out when every
    /// size is.
    pub fn new(
        drop: LimitedDrop,
        now: OffsetDateTime,
        remaining: &FreeUnits,
        default_window: goods_domain::PaymentWindow,
    ) -> Self {
        let in_all = units_in_all(remaining);
        let status = drop.status(now, in_all);
        let sizes = match drop.sizes.is_sized() {
            false => Vec::new(),
            true => drop
                .sizes
                .iter()
                .map(|size| {
                    let left = remaining.get(&size.sku).copied().unwrap_or(0);
                    SizeView {
                        size: size.clone(),
                        remaining: left,
                        status: status.of_size(left),
                    }
                })
                .collect(),
        };
        Self {
            status,
            payment_window: drop.payment_window_or(default_window),
            drop,
            remaining: in_all,
            sizes,
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
        Ok(DropView::new(drop, self.clock.now(), &remaining, self.payment_window).with_draw(draw))
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
        m.core
            .expect_remaining()
            .times(1)
            .returning(|_| Ok(goods_domain::ports::whole_units(0)));
        m.core.expect_draw_view().times(1).returning(|_| Ok(None));
        let view = m.service().get(drop_id()).await.unwrap();
        assert_eq!(view.remaining, 0);
        assert_eq!(view.status, DropStatus::SoldOut);
    }

    #[tokio::test]
    async fn a_drop_in_sizes_shows_each_size_and_is_sold_out_once_every_size_is() {
        let view_with = async |nine: u32, ten: u32| {
            let mut m = DropMocks::new();
            m.drops = drops_serving(sample_sized_drop());
            m.core.checkpoint();
            m.core.expect_remaining().returning(move |_| {
                Ok(FreeUnits::from([(sku("US-9"), nine), (sku("US-10"), ten)]))
            });
            m.core.expect_draw_view().returning(|_| Ok(None));
            m.service().get(drop_id()).await.unwrap()
        };
        let view = view_with(0, 3).await;
        assert_eq!((view.status, view.remaining), (DropStatus::Open, 3));
        let sizes: Vec<_> = view
            .sizes
            .iter()
            .map(|s| (s.size.sku.clone(), s.remaining, s.status))
            .collect();
        assert_eq!(
            sizes,
            [
                (sku("US-9"), 0, DropStatus::SoldOut),
                (sku("US-10"), 3, DropStatus::Open)
            ]
        );
        let gone = view_with(0, 0).await;
        assert_eq!((gone.status, gone.remaining), (DropStatus::SoldOut, 0));
        let plain = DropMocks::new().service().get(drop_id()).await.unwrap();
        assert!(plain.sizes.is_empty(), "a drop without sizes lists none");
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
