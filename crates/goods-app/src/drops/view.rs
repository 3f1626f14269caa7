//! GetLimitedDrop.

use crate::{DrawView, GoodsApp};
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

    /// With a draw drop's draw.
    #[must_use]
    pub fn with_draw(self, draw: Option<DrawView>) -> Self {
        Self { draw, ..self }
    }
}

/// Why a drop, or what is known of it (its stats, its reconciliation), could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DropReadError {
    /// No such drop.
    #[error("drop not found")]
    NotFound,
    /// The store failed.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl GoodsApp {
    /// Reads a drop with its units left and status (not found while `limited-drop.enabled` is
    /// off).
    ///
    /// # Errors
    /// [`DropReadError::NotFound`], or `Infra` when the store fails.
    #[tracing::instrument(skip_all, fields(drop.id = %id))]
    pub async fn get_drop(&self, id: DropId) -> Result<DropView, DropReadError> {
        if !self.drops_on() {
            return Err(DropReadError::NotFound);
        }
        let drop = self.drops.load(id).await?.ok_or(DropReadError::NotFound)?;
        self.view_of(drop).await.map_err(Into::into)
    }

    /// `drop` as clients see it now: units left, status, and a draw drop's draw.
    pub(crate) async fn view_of(&self, drop: LimitedDrop) -> Result<DropView, InfraError> {
        let remaining = self.remaining(&drop).await?;
        let draw = self.draw_view(&drop).await?;
        Ok(
            DropView::new(drop, self.ports.clock.now(), remaining, self.payment_window)
                .with_draw(draw),
        )
    }
}
