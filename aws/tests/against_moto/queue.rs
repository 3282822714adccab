use crate::support::{settings, Peer};
use dovetail_aws::calls::Calls;
use dovetail_aws::interruption_queue::InterruptionQueue;
use dovetail_dataflow::facts::{Interruption, InterruptionKind};
use std::sync::Arc;
use tokio::runtime::Runtime;

const SPOT: &str = include_str!("../../../data/events/spot_interruption_warning.json");
const REBALANCE: &str = include_str!("../../../data/events/rebalance_recommendation.json");
const SCHEDULED: &str = include_str!("../../../data/events/scheduled_change_aws_health.json");
const STATE: &str = include_str!("../../../data/events/instance_state_change.json");
const RESERVATION: &str =
    include_str!("../../../data/events/capacity_reservation_interruption_warning.json");

#[test]
fn every_message_kind_becomes_an_interruption_and_bad_bodies_are_deleted_not_fatal() {
    let peer = Peer::start();
    let rt = Runtime::new().expect("a runtime");
    let clients = rt.block_on(peer.clients());
    let url = rt
        .block_on(clients.sqs.create_queue().queue_name("test-cluster").send())
        .expect("CreateQueue")
        .queue_url()
        .expect("a queue URL")
        .to_string();
    let stopping = STATE.replace("\"pending\"", "\"stopping\"");
    let not_json = "{ this is not JSON";
    let mut no_instance: serde_json::Value = serde_json::from_str(SPOT).expect("JSON");
    if let Some(detail) = no_instance
        .get_mut("detail")
        .and_then(|d| d.as_object_mut())
    {
        detail.remove("instance-id");
    }
    let no_instance = no_instance.to_string();
    for body in [
        SPOT,
        REBALANCE,
        SCHEDULED,
        &stopping,
        RESERVATION,
        STATE,
        not_json,
        &no_instance,
    ] {
        rt.block_on(
            clients
                .sqs
                .send_message()
                .queue_url(&url)
                .message_body(body)
                .send(),
        )
        .expect("SendMessage");
    }

    let calls = Arc::new(Calls::new(&settings()));
    // Opened by name, as Karpenter's INTERRUPTION_QUEUE gives it.
    let queue = rt
        .block_on(InterruptionQueue::open(
            clients.sqs.clone(),
            calls,
            "test-cluster",
        ))
        .expect("the queue")
        .with_wait_seconds(0);
    assert_eq!(queue.url(), url);
    let mut got: Vec<Interruption> = Vec::new();
    let mut sink = |i: Interruption| got.push(i);
    let mut polls = 0;
    while queue.stats().received < 8 {
        polls += 1;
        assert!(
            polls < 50,
            "the queue did not deliver every message: {:?}",
            queue.stats()
        );
        rt.block_on(queue.poll_once(&mut sink))
            .expect("ReceiveMessage");
    }
    let stats = queue.stats();
    assert_eq!(stats.received, 8);
    assert_eq!(stats.malformed, 2, "{stats:?}");
    assert_eq!(stats.ignored, 1, "the pending state change: {stats:?}");
    assert_eq!(
        stats.deleted, 8,
        "every message is deleted once handled: {stats:?}"
    );
    let kinds: Vec<InterruptionKind> = got.iter().map(|i| i.kind).collect();
    for kind in [
        InterruptionKind::SpotInterruption,
        InterruptionKind::RebalanceRecommendation,
        InterruptionKind::ScheduledChange,
        InterruptionKind::StateChange,
        InterruptionKind::CapacityReservationInterruption,
    ] {
        assert!(kinds.contains(&kind), "{kind:?} in {kinds:?}");
    }
    assert!(got.iter().any(|i| i.target == "i-abcd1111"), "{got:?}");

    // Nothing comes back: the queue is empty.
    let more = rt
        .block_on(queue.poll_once(&mut |_| {}))
        .expect("ReceiveMessage");
    assert_eq!(more, 0);
}
