//! `lessgate run`: one node, from a config file and/or flags, in the spirit
//! of Tundra's own `--server --port 2345 --file scene.txml`. SIGHUP (or
//! `lessgate reload`) reloads the configuration: the file is read again and
//! the same flags applied over it.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use crate::config::{LogFormat, NodeConfig};

#[derive(Debug, Clone, Args, Default)]
pub struct RunArgs {
    /// Node configuration file (TOML); flags given here win over it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address for Tundra WebSocket clients (default 127.0.0.1:2345).
    #[arg(long, value_name = "ADDR")]
    pub tundra_listen: Option<SocketAddr>,
    /// Address for native Tundra clients over kNet, UDP and TCP on one
    /// port (off unless given here or as `[tundra] knet_listen`).
    #[arg(long, value_name = "ADDR")]
    pub knet_listen: Option<SocketAddr>,
    /// A TXML scene to host.
    #[arg(long, value_name = "FILE.txml")]
    pub scene: Option<PathBuf>,
    /// Address for the web viewer, `/status`, `/metrics`, `/healthz` and
    /// `/readyz` (overrides `[http] listen`; port 0 picks a free port).
    #[arg(long, value_name = "ADDR")]
    pub http_listen: Option<SocketAddr>,
    /// Write the process id here while the node runs, for `lessgate
    /// reload --pid-file FILE`.
    #[arg(long, value_name = "FILE")]
    pub pid_file: Option<PathBuf>,
    /// Set from the global `--log-format`.
    #[arg(skip)]
    pub log_format: Option<LogFormat>,
}

impl RunArgs {
    /// The node configuration these arguments describe.
    pub fn resolve(&self) -> Result<NodeConfig, Box<dyn std::error::Error>> {
        let mut config = match &self.config {
            Some(path) => NodeConfig::load(path)?,
            None => NodeConfig::default(),
        };
        if let Some(addr) = self.tundra_listen {
            config.tundra.listen = addr;
        }
        if let Some(addr) = self.knet_listen {
            config.tundra.knet_listen = Some(addr);
        }
        if let Some(addr) = self.http_listen {
            config.http.listen = Some(addr);
        }
        if let Some(scene) = &self.scene {
            config.tundra.scene = Some(scene.clone());
        }
        if let Some(format) = self.log_format {
            config.log.format = format;
        }
        Ok(config)
    }
}

pub fn run(args: RunArgs) -> Result<(), Box<dyn std::error::Error>> {
    let config = args.resolve()?;
    // Every file the config names is read now, so a bad one stops the node
    // before it opens a socket, with the file and key in the message.
    config.check_files()?;
    crate::logging::init(config.log.format, &config.log.filter)?;
    crate::transport::open_files::raise_open_file_limit();
    let runtime = crate::runtime::tokio_runtime(config.node.threads)?;
    runtime.block_on(async move {
        // Taken before anything starts: SIGHUP's default would end the node.
        let reload_requests = reload_requests()?;
        let mut running = crate::runtime::start(config).await?;
        println!(
            "lessgate: Tundra clients connect to {}",
            running.tundra_url()
        );
        if let Some(addr) = running.knet_addr() {
            match running.knet_tcp() {
                true => println!("lessgate: native Tundra clients connect to knet+udp://{addr} and knet+tcp://{addr}"),
                false => println!("lessgate: native Tundra clients connect to knet+udp://{addr}"),
            }
        }
        if let Some(addr) = running.http_addr() {
            println!("lessgate: status, metrics and health at http://{addr}/");
        }
        if let Some(addr) = running.peer_control_addr() {
            println!("lessgate: peer links listen on {addr} (QUIC)");
        }
        let pid_file = args.pid_file.clone();
        if let Some(file) = &pid_file {
            std::fs::write(file, format!("{}\n", std::process::id()))
                .map_err(|error| format!("cannot write the pid file {}: {error}", file.display()))?;
        }
        if let Some(requests) = reload_requests {
            let load = move || {
                let config = args.resolve().map_err(|error| error.to_string())?;
                config.check_files().map_err(|error| error.to_string())?;
                Ok(config)
            };
            running.set_reload(crate::runtime::ReloadSource {
                requests,
                load: Box::new(load),
            });
        }
        running.run(shutdown_signal()).await;
        if let Some(file) = &pid_file {
            let _ = std::fs::remove_file(file);
        }
        Ok(())
    })
}

/// One message per SIGHUP (requests that arrive during a reload are
/// folded into one more); `None` where there is no SIGHUP.
fn reload_requests() -> std::io::Result<Option<tokio::sync::mpsc::Receiver<()>>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut hangup = signal(SignalKind::hangup())?;
        let (requests, received) = tokio::sync::mpsc::channel(1);
        tokio::spawn(async move {
            while hangup.recv().await.is_some() {
                if requests.try_send(()).is_err() && requests.is_closed() {
                    return;
                }
            }
        });
        Ok(Some(received))
    }
    #[cfg(not(unix))]
    {
        Ok(None)
    }
}

/// Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
