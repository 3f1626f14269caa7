//! CreateLimitedDrop: store the drop, then seed the gate.

use super::Drops;
use crate::{Actor, DrawView, DropView};
use goods_domain::ports::GateSeed;
use goods_domain::{CreateDropError, DrawCounts, DrawToSeal, DropInput, NewLimitedDrop};

impl Drops {
    /// Validates and stores a drop of a product `actor` manages, then seeds the gate; a gate
    /// that fails now is seeded by the first purchase, so it does not fail the creation.
    #[tracing::instrument(skip_all, fields(product.id = input.product_id))]
    pub async fn create(
        &self,
        input: DropInput,
        actor: Actor,
    ) -> Result<DropView, CreateDropError> {
        if !self.flags.drops_on() {
            return Err(CreateDropError::FeatureOff);
        }
        let now = self.clock.now();
        let new = NewLimitedDrop::parse(&input, now).map_err(CreateDropError::Invalid)?;
        // Another seller's product does not exist for this caller.
        if !crate::actor::manages_product(&*self.products, new.product_id, actor).await? {
            return Err(CreateDropError::ProductNotFound);
        }
        // A draw's secret seed is drawn now and stored sealed with the drop, for the drop's id
        // (the store seals it once it has numbered the drop); only its commitment is shown
        // until the draw, and the clear seed leaves this function only inside the vault's seal.
        let draw = match new.mode.is_draw() {
            true => {
                let seed = self.seeds.seed()?;
                let commitment = seed.commitment();
                let seeds = std::sync::Arc::clone(&self.seeds);
                Some(DrawToSeal::new(commitment, move |drop| {
                    seeds.seal(drop, &seed, &commitment)
                }))
            }
            false => None,
        };
        let commitment = draw.as_ref().map(|d| d.commitment);
        let drop = self
            .drops
            .create(&new, draw, now, self.seller_quota)
            .await?;
        self.cache.created(&drop);
        // The other instances learn of it by the notice at once (or their next scan).
        self.core.announce_change();
        if let Some(gate) = self.gate.as_ref().filter(|_| !drop.mode.is_draw()) {
            let seed = GateSeed {
                unexplained: Vec::new(),
                drop_id: drop.id,
                remaining: GateSeed::remaining_of(&drop, &[]),
                expires_at: drop.window.close_at(),
                orders: Vec::new(),
            };
            if let Err(error) = gate.seed_if_absent(&seed).await {
                tracing::warn!(drop.id = %drop.id, error = %error, "gate not seeded at creation; it will be seeded on first purchase");
            }
        }
        let draw =
            drop.mode
                .entry_close_at()
                .zip(commitment)
                .map(|(entry_close_at, commitment)| DrawView {
                    entry_close_at,
                    commitment,
                    seed: None,
                    entries_root: None,
                    drawn_at: None,
                    cutoff: None,
                    size_cutoffs: Vec::new(),
                    counts: DrawCounts::default(),
                });
        Ok(DropView::new(
            drop.clone(),
            now,
            &GateSeed::remaining_of(&drop, &[]),
            self.payment_window,
        )
        .with_draw(draw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drops::testing::DropMocks;
    use crate::test_support::*;
    use goods_domain::ports::MockAdmissionGate;

    fn input() -> DropInput {
        DropInput {
            product_id: 1,
            open_at: OPEN,
            close_at: CLOSE,
            limited_quantity: Some(100),
            variants: None,
            per_user_limit: 1,
            price_minor: 0,
            currency: "XXX".into(),
            mode: "FIRST_COME".into(),
            entry_close_at: None,
            payment_window_seconds: None,
        }
    }

    #[tokio::test]
    async fn a_valid_drop_is_stored_and_the_gate_seeded_with_its_quantity() {
        let mut m = DropMocks::new();
        m.drops
            .expect_create()
            .times(1)
            .returning(|_, _, _, _| Ok(sample_drop(100, 1)));
        let mut gate = MockAdmissionGate::new();
        gate.expect_done_markers().returning(|_| Ok(Vec::new()));
        gate.expect_seed_if_absent()
            .withf(|seed| {
                seed.remaining == goods_domain::ports::whole_units(100) && seed.orders.is_empty()
            })
            .times(1)
            .returning(|_| Ok(()));
        m.gate = Some(gate);
        m.core.expect_announce_change().times(1).return_const(());
        let view = m.service().create(input(), admin()).await.unwrap();
        assert_eq!(view.remaining, 100);
    }

    fn product_owned_by(owner: i64) -> goods_domain::Product {
        let mut product = goods_domain::Product {
            id: goods_domain::ProductId::parse(1).unwrap(),
            name: goods_domain::ProductName::parse("Sneaker").unwrap(),
            stock: goods_domain::Stock::new(100, 0),
            variants: Vec::new(),
            owner: None,
        };
        product.owner = goods_domain::UserId::parse(owner).ok();
        product
    }

    #[tokio::test]
    async fn another_sellers_product_does_not_exist_for_the_caller_and_nothing_is_stored() {
        let mut m = DropMocks::new();
        m.products
            .expect_get()
            .returning(|_| Ok(Some(product_owned_by(7))));
        m.drops.expect_create().never();
        let err = m.service().create(input(), seller(8)).await.unwrap_err();
        assert!(matches!(err, CreateDropError::ProductNotFound));
    }

    #[tokio::test]
    async fn the_owning_seller_creates_a_drop_and_a_product_without_owner_is_for_admins_only() {
        let mut m = DropMocks::new();
        m.products
            .expect_get()
            .returning(|_| Ok(Some(product_owned_by(7))));
        m.drops
            .expect_create()
            .times(1)
            .returning(|_, _, _, _| Ok(sample_drop(100, 1)));
        m.core.expect_announce_change().return_const(());
        assert!(m.service().create(input(), seller(7)).await.is_ok());

        let mut m = DropMocks::new();
        m.products
            .expect_get()
            .returning(|_| Ok(Some(product_owned_by(0))));
        m.drops.expect_create().never();
        let err = m.service().create(input(), seller(7)).await.unwrap_err();
        assert!(matches!(err, CreateDropError::ProductNotFound));
    }

    #[tokio::test]
    async fn an_invalid_drop_reaches_no_store() {
        let m = DropMocks::new();
        let bad = DropInput {
            per_user_limit: 0,
            ..input()
        };
        let err = m.service().create(bad, admin()).await.unwrap_err();
        assert!(
            matches!(err, CreateDropError::Invalid(fields) if fields[0].field == "perUserLimit")
        );
    }

    #[tokio::test]
    async fn a_stock_below_the_limited_quantity_is_reported_on_that_field() {
        let mut m = DropMocks::new();
        // The store checks the stock with the drop's own rule, in its transaction.
        m.drops.expect_create().returning(|drop, _, _, _| {
            Err(CreateDropError::Invalid(
                drop.check_product(10, &[]).err().into_iter().collect(),
            ))
        });
        let err = m.service().create(input(), admin()).await.unwrap_err();
        assert!(
            matches!(err, CreateDropError::Invalid(fields) if fields[0].field == "limitedQuantity")
        );
    }
}
