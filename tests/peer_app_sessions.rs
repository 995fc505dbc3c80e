//! The application runs each link's LESS session (as the node core does);
//! the transport only moves frames. One node's session is run by hand here,
//! step by step with its own clock; the other's by the shared `Sessions`
//! helper. The settings are handed over once, and the two interoperate.

mod peer_common;

use lessgate::clock::Time;
use lessgate::config::PeerLinkMode;
use lessgate::less::property_list::PropertyValue;
use lessgate::less::session::{Event, Session};
use lessgate::less::value::Value;
use lessgate::transport::peer::{Frame, PeerEvent, PeerNode};
use peer_common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_run_by_hand_talks_to_one_run_by_the_helper() {
    logs();
    let alpha = Seat::new("alpha", 0xa1, PeerLinkMode::Udp);
    let beta = Seat::new("beta", 0xb2, PeerLinkMode::Udp);
    let alpha_config = config(&alpha, vec![beta.as_peer(true)], PeerLinkMode::Udp);
    let beta_config = config(&beta, vec![alpha.as_peer(false)], PeerLinkMode::Udp);
    // alpha's events are read raw, beta's through the helper.
    let (alpha_node, mut alpha_events) =
        PeerNode::start_on(alpha_config, alpha.control, alpha.data)
            .await
            .unwrap();
    let (beta_node, mut beta_events) = start(beta, beta_config).await;

    // alpha's application: its own clock, its own session.
    let origin = tokio::time::Instant::now();
    let now = move || Time::from_micros(origin.elapsed().as_micros() as u64);
    let link = loop {
        let event = tokio::time::timeout(PATIENCE, alpha_events.recv())
            .await
            .expect("alpha's link up")
            .expect("events");
        if let PeerEvent::LinkUp(link) = event {
            break link;
        }
    };
    let settings = link.take_link_settings().unwrap();
    let mut session = Session::new(settings.session, now()).unwrap();
    assert!(link.take_link_settings().is_none(), "handed over once");
    let to_alpha = link_up(&mut beta_events, "alpha").await;

    let type_id = session.introduce_type(CRATE).unwrap();
    let entity = session.allocate_object_id();
    session
        .introduce_entity(
            entity,
            type_id,
            vec![PropertyValue {
                key: name_key(),
                value: Value::String("run by alpha".into()),
            }],
        )
        .unwrap();
    offer_crate(&mut beta_events, &to_alpha, "run by the helper");

    // alpha's loop: frames in, timers, transmits out, until it has seen
    // beta's entity; beta's side runs in the helper meanwhile.
    let beta_side = tokio::spawn(async move {
        accept_crate(&mut beta_events, &to_alpha, "alpha").await;
        let name = introduced_name(&mut beta_events, "alpha").await;
        (name, beta_events, to_alpha)
    });
    let mut seen = None;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while seen.is_none() {
        while let Some(transmit) = session.poll_transmit(now()) {
            link.transmit(transmit).unwrap();
        }
        while let Some(event) = session.poll_event() {
            match event {
                Event::TypeIntroduced { type_id, uri, .. } if uri == CRATE => {
                    session.subscribe_type(type_id, &[name_key()]).unwrap()
                }
                Event::EntityIntroduced { values, .. } => {
                    seen = values.into_iter().find_map(|v| match v.value {
                        Value::String(name) => Some(name),
                        _ => None,
                    })
                }
                _ => {}
            }
        }
        let wake = session
            .poll_timeout()
            .map(|at| origin + std::time::Duration::from_micros(at.as_micros()))
            .unwrap_or(deadline)
            .min(deadline);
        assert!(
            tokio::time::Instant::now() < deadline,
            "alpha saw nothing from beta"
        );
        tokio::select! {
            event = alpha_events.recv() => match event.expect("events") {
                PeerEvent::Frame { frame: Frame::Datagram(bytes), .. } => session.handle_datagram(now(), &bytes),
                PeerEvent::Frame { frame: Frame::Stream(bytes), .. } => session.handle_stream_frame(now(), &bytes),
                _ => {}
            },
            _ = tokio::time::sleep_until(wake) => session.handle_timeout(now()),
        }
    }
    assert_eq!(seen.as_deref(), Some("run by the helper"));
    link.report_stats(session.stats());
    let (name, _beta_events, _to_alpha) = beta_side.await.unwrap();
    assert_eq!(name, "run by alpha");

    alpha_node.shutdown().await;
    beta_node.shutdown().await;
}
