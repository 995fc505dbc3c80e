//! The machine's raw limits, measured in the same run so every result can
//! be read as a ratio: WebSocket frames per second into a sink that only
//! counts them, UDP datagrams per second of the same size, blake3 keyed
//! hashes per second; and the wire sizes of one transform update in the
//! formats the report compares (Hadean Aether's packed struct, Tundra's
//! EditAttributes and RigidBodyUpdate).

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::client::{edit_frame, Error, PLACEABLE};
use super::proc_stats::{current_thread_id, thread_cpu_seconds};
use crate::tundra::rigid_body_sender::{encode_body, pack, BodyState, SendDecision};
use crate::tundra::values::{Float3, Transform};
use crate::tundra::{ComponentId, EntityId, ProtocolVersion, Registry};

/// Hadean Aether's packed entity struct, `HADEAN_PACK(struct Entity { vec3f
/// position; quat rotation; unsigned int color; unsigned long id; float
/// size; })`: 12 + 16 + 4 + 8 + 4.
pub const AETHER_ENTITY_BYTES: usize = 44;

/// What the WebSocket sink counted over its window.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct SinkRate {
    /// Frames counted per second of wall time (the senders share the
    /// machine with the sink).
    pub frames_per_sec: f64,
    /// Cores the sink's own thread used over the window: the receiving
    /// side alone, which is what a node's client side is compared with.
    pub sink_cores: Option<f64>,
}

impl SinkRate {
    /// Frames the sink takes per second of its own CPU time.
    pub fn frames_per_core_sec(&self) -> Option<f64> {
        self.sink_cores
            .filter(|cores| *cores > 0.0)
            .map(|cores| self.frames_per_sec / cores)
    }
}

/// Frames per second `connections` clients push through tokio-tungstenite
/// into a server that only counts them, for `duration`. The server runs on
/// one thread of its own (a current-thread runtime, as a node's client
/// side would at best), so its CPU time is measured apart from the senders'.
pub async fn websocket_sink_rate(
    frame_bytes: usize,
    connections: usize,
    duration: Duration,
) -> Result<SinkRate, Error> {
    let counted = Arc::new(AtomicU64::new(0));
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let sink_count = counted.clone();
    let sink = std::thread::Builder::new()
        .name("ws-sink".to_owned())
        .spawn(move || -> Result<(), std::io::Error> {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await?;
                let _ = ready_tx.send((listener.local_addr()?, current_thread_id()));
                let accept = async {
                    for _ in 0..connections {
                        let Ok((tcp, _)) = listener.accept().await else {
                            return;
                        };
                        let count = sink_count.clone();
                        tokio::spawn(async move {
                            let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
                                return;
                            };
                            while let Some(Ok(_)) = ws.next().await {
                                count.fetch_add(1, Ordering::Relaxed);
                            }
                        });
                    }
                    std::future::pending::<()>().await;
                };
                tokio::select! {
                    _ = accept => {}
                    _ = stop_rx => {}
                }
                Ok(())
            })
        })?;
    let (addr, sink_tid) = ready_rx
        .await
        .map_err(|_| "the sink thread failed to start")?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut senders = Vec::new();
    for _ in 0..connections {
        let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}")).await?;
        let stop = stop.clone();
        let frame = bytes::Bytes::from(vec![0x71u8; frame_bytes]);
        senders.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..256 {
                    if ws.feed(WsMessage::Binary(frame.clone())).await.is_err() {
                        return;
                    }
                }
                if ws.flush().await.is_err() {
                    return;
                }
            }
            let _ = ws.close(None).await;
        }));
    }
    // Measure after a short ramp so connection setup is not counted.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let sink_cpu = || sink_tid.and_then(thread_cpu_seconds);
    let cpu_before = sink_cpu();
    let before = counted.load(Ordering::Relaxed);
    let started = Instant::now();
    tokio::time::sleep(duration).await;
    let frames = counted.load(Ordering::Relaxed) - before;
    let elapsed = started.elapsed().as_secs_f64();
    let cpu_after = sink_cpu();
    stop.store(true, Ordering::Relaxed);
    for sender in senders {
        let _ = sender.await;
    }
    let _ = stop_tx.send(());
    let _ = tokio::task::spawn_blocking(move || sink.join()).await;
    Ok(SinkRate {
        frames_per_sec: frames as f64 / elapsed,
        sink_cores: cpu_before
            .zip(cpu_after)
            .map(|(before, after)| (after - before) / elapsed),
    })
}

/// Datagrams per second received over 127.0.0.1 from one sending thread.
pub fn udp_rate(datagram_bytes: usize, duration: Duration) -> Result<f64, Error> {
    let receiver = UdpSocket::bind("127.0.0.1:0")?;
    receiver.set_read_timeout(Some(Duration::from_millis(100)))?;
    let target = receiver.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let sender_stop = stop.clone();
    let sender = std::thread::spawn(move || -> std::io::Result<()> {
        let socket = UdpSocket::bind("127.0.0.1:0")?;
        socket.connect(target)?;
        let datagram = vec![0x5au8; datagram_bytes];
        while !sender_stop.load(Ordering::Relaxed) {
            // A full receive buffer drops; the receiver's count is the rate.
            let _ = socket.send(&datagram);
        }
        Ok(())
    });
    let mut buffer = vec![0u8; 65536];
    let started = Instant::now();
    let mut received = 0u64;
    while started.elapsed() < duration {
        if receiver.recv(&mut buffer).is_ok() {
            received += 1;
        }
    }
    let rate = received as f64 / started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let _ = sender.join();
    Ok(rate)
}

/// blake3 keyed hashes of `input_bytes` per second on one core.
pub fn blake3_keyed_rate(input_bytes: usize, duration: Duration) -> f64 {
    let key = [7u8; 32];
    let mut input = vec![0u8; input_bytes];
    let started = Instant::now();
    let mut hashes = 0u64;
    while started.elapsed() < duration {
        for _ in 0..1024 {
            let tag = blake3::keyed_hash(&key, std::hint::black_box(&input));
            input[0] ^= tag.as_bytes()[0];
            hashes += 1;
        }
    }
    hashes as f64 / started.elapsed().as_secs_f64()
}

/// Wire sizes of one entity's transform update, bytes.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct WireSizes {
    /// Hadean Aether's packed entity struct (position, rotation, colour,
    /// id, size): what another engine sends per entity update.
    pub aether_packed_entity: usize,
    /// A Tundra EditAttributes frame (with its 2-byte id) moving a
    /// Placeable's Transform: what a client sends and a server forwards.
    pub tundra_edit_attributes: usize,
    /// A RigidBodyUpdate payload (plus the 2-byte id) for a position-only
    /// move inside +-1023 (Tundra's fixed-point position).
    pub tundra_rigid_body_position: usize,
    /// The same with position and a general rotation (axis-angle).
    pub tundra_rigid_body_position_rotation: usize,
}

/// Computes [`WireSizes`] with the project's Tundra codec.
pub fn wire_sizes() -> Result<WireSizes, Error> {
    let registry = Registry::builtin();
    let slots = registry.get(PLACEABLE).ok_or("no Placeable")?.slot_types();
    // Ids of the magnitude a busy scene has (VLE sizes depend on them).
    let edit = edit_frame(
        EntityId(5000),
        ComponentId(3),
        1234,
        42,
        &slots,
        ProtocolVersion(3),
    )?;
    let moved = |rot: Float3| BodyState {
        transform: Transform {
            pos: Float3::new(12.5, 3.25, -40.0),
            rot,
            scale: Float3::new(1.0, 1.0, 1.0),
        },
        ..BodyState::default()
    };
    let record_size = |state: BodyState, rotation: bool| -> Result<usize, Error> {
        let decision = SendDecision {
            position: true,
            rotation,
            ..SendDecision::default()
        };
        let record = encode_body(EntityId(5000), &state, &decision).ok_or("nothing to send")?;
        let messages = pack(&[record])?;
        Ok(2 + messages.iter().map(Vec::len).sum::<usize>())
    };
    Ok(WireSizes {
        aether_packed_entity: AETHER_ENTITY_BYTES,
        tundra_edit_attributes: edit.len(),
        tundra_rigid_body_position: record_size(moved(Float3::new(0.0, 0.0, 0.0)), false)?,
        tundra_rigid_body_position_rotation: record_size(
            moved(Float3::new(10.0, 35.0, -20.0)),
            true,
        )?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_sizes_order_as_the_formats_do() {
        let sizes = wire_sizes().unwrap();
        // A full Transform is 9 floats; the frame adds id, ids and block header.
        assert!(sizes.tundra_edit_attributes > 36);
        assert!(sizes.tundra_rigid_body_position < sizes.tundra_rigid_body_position_rotation);
        assert!(sizes.tundra_rigid_body_position < sizes.tundra_edit_attributes);
    }

    #[test]
    fn the_raw_rates_count_something() {
        assert!(blake3_keyed_rate(64, Duration::from_millis(10)) > 0.0);
        assert!(udp_rate(64, Duration::from_millis(50)).unwrap() > 0.0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_websocket_sink_counts_frames_and_its_own_cpu() {
        let rate = websocket_sink_rate(44, 2, Duration::from_millis(300))
            .await
            .unwrap();
        assert!(rate.frames_per_sec > 0.0);
        // The sink thread did the receiving, so it was charged for it.
        let cores = rate.sink_cores.unwrap();
        // One thread is at most one core (stat counts 10 ms ticks: some slack).
        assert!(cores > 0.0 && cores <= 1.1, "sink cores {cores}");
    }
}
