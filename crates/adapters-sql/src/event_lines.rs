//! A decision's events in one `event_batches` row: a line each, type, tab, subject, tab, data.
//! Types and subjects are the service's, data compact JSON, so nothing needs escaping; a line
//! that breaks the rule is refused when written.

use crate::event_data;
use goods_domain::{EventType, Fact, GoodsOrder};

/// One event as the batch row keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredEvent {
    pub(crate) kind: String,
    pub(crate) subject: String,
    pub(crate) data: String,
}

/// The lines of `facts`, in order, with `\n` between them (none after the last).
pub(crate) fn encode(facts: &[Fact]) -> String {
    let mut text = String::with_capacity(facts.len() * 320);
    for (i, fact) in facts.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        push(&mut text, fact);
    }
    text
}

fn push(text: &mut String, fact: &Fact) {
    let (kind, subject, data) = (
        fact.event_type().as_str(),
        fact.subject(),
        event_data::render(fact),
    );
    // The rule the reader relies on; the service makes all three, so this never fails.
    assert!(
        !kind.contains(['\t', '\n'])
            && !subject.contains(['\t', '\n'])
            && !data.contains(['\t', '\n']),
        "an event line would not read back: {kind:?} {subject:?}"
    );
    text.push_str(kind);
    text.push('\t');
    text.push_str(&subject);
    text.push('\t');
    text.push_str(&data);
}

/// The `goods.order.placed` lines of `orders`, as just placed, without their data: the order's
/// row has all of it, and a batch of 64 orders is then a row of about 2 KB instead of 25 KB of
/// JSON. The reader renders it from the row ([`GoodsOrder::as_placed`]) when it moves the line.
pub(crate) fn encode_placed(orders: &[GoodsOrder]) -> String {
    let mut text = String::with_capacity(orders.len() * 36);
    for (i, order) in orders.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        text.push_str(EventType::OrderPlaced.as_str());
        text.push('\t');
        text.push_str(&Fact::OrderPlaced(order.clone()).subject());
        text.push('\t');
    }
    text
}

impl StoredEvent {
    /// The order whose data this line leaves to its row: a `goods.order.placed` line without
    /// data.
    pub(crate) fn order_to_render(&self) -> Option<i64> {
        if !self.data.is_empty() || self.kind != EventType::OrderPlaced.as_str() {
            return None;
        }
        self.subject.strip_prefix("orders/")?.parse().ok()
    }
}

/// The events of `text`; `None` when a line has not three parts, or when there are not
/// `count` of them.
pub(crate) fn decode(text: &str, count: usize) -> Option<Vec<StoredEvent>> {
    let events: Vec<StoredEvent> = text
        .split('\n')
        .map(|line| {
            let mut parts = line.splitn(3, '\t');
            Some(StoredEvent {
                kind: parts.next()?.to_owned(),
                subject: parts.next()?.to_owned(),
                data: parts.next()?.to_owned(),
            })
        })
        .collect::<Option<_>>()?;
    (events.len() == count).then_some(events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use goods_domain::{DropId, Fact};

    fn sold_out(drop: i64, limited: u32) -> Fact {
        Fact::DropSoldOut {
            drop: DropId::parse(drop).unwrap(),
            limited,
        }
    }

    #[test]
    fn lines_read_back_as_the_events_written_in_order() {
        let facts = [
            sold_out(7, 3),
            Fact::GateDegraded {
                drop: DropId::parse(7).unwrap(),
            },
        ];
        let text = encode(&facts);
        assert_eq!(text.lines().count(), 2);
        let read = decode(&text, 2).unwrap();
        for (fact, event) in facts.iter().zip(&read) {
            assert_eq!(event.kind, fact.event_type().as_str());
            assert_eq!(event.subject, fact.subject());
            assert_eq!(event.data, event_data::render(fact));
        }
    }

    #[test]
    fn data_with_tabs_and_line_breaks_in_its_strings_stays_on_its_line() {
        // Text that is not the service's ids (a reason) arrives in the data as JSON escapes.
        let voided = Fact::EntryVoided {
            drop: DropId::parse(1).unwrap(),
            user: goods_domain::UserId::parse(2).unwrap(),
            sku: None,
            reason: "a\tb\nc".into(),
        };
        let text = encode(&[voided.clone(), sold_out(1, 1)]);
        let read = decode(&text, 2).unwrap();
        assert_eq!(read[0].data, event_data::render(&voided));
        let data: serde_json::Value = serde_json::from_str(&read[0].data).unwrap();
        assert_eq!(data["reason"], "a\tb\nc");
    }

    #[test]
    fn only_a_placed_order_line_without_data_is_left_to_its_row() {
        let read = decode(
            "goods.order.placed\torders/42\t\ngoods.order.placed\torders/43\t{}\n\
             goods.order.paid\torders/44\t",
            3,
        )
        .unwrap();
        let left: Vec<Option<i64>> = read.iter().map(StoredEvent::order_to_render).collect();
        assert_eq!(left, [Some(42), None, None]);
    }

    #[test]
    fn a_short_line_or_a_wrong_count_is_refused() {
        assert_eq!(decode("goods.drop.closed\tdrops/1", 1), None);
        let text = encode(&[sold_out(7, 3)]);
        assert_eq!(decode(&text, 2), None);
        assert_eq!(decode(&text, 1).map(|e| e.len()), Some(1));
    }
}
