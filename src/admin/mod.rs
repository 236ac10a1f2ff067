//! The operator's JSON-RPC: loopback only, HTTP with cookie authentication as bitcoind has it.
//! `cairn status` uses it to ask a running cairn; `stop` ends one.

mod status;

use std::net::SocketAddr;
use std::sync::Arc;

use base64::Engine;
use bitcoin::hex::DisplayHex;
use jsonrpsee::core::client::ClientT;
use jsonrpsee::rpc_params;
use jsonrpsee::server::{RpcModule, Server, ServerConfig, ServerHandle};
use jsonrpsee::types::ErrorObjectOwned;
use jsonrpsee_http_client::{HeaderMap, HeaderValue, HttpClient, HttpClientBuilder};
use tokio::sync::watch;

use crate::datadir::{DataDir, DataDirError};
pub use status::{DiskStatus, Status, SyncStatus, TipStatus};

/// The user name in the cookie file, as bitcoind writes it.
pub const COOKIE_USER: &str = "__cookie__";

/// Errors of the admin RPC.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The server could not start.
    #[error("admin RPC cannot listen on {addr}: {message}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        message: String,
    },
    /// Writing the cookie or address file failed.
    #[error(transparent)]
    DataDir(#[from] DataDirError),
    /// No running cairn answers (no cookie or address file).
    #[error("no running cairn found in {0} (no .cookie or admin.addr)")]
    NotRunning(String),
    /// The running cairn did not answer as expected.
    #[error("admin RPC call {method} failed: {message}")]
    Call {
        /// The method.
        method: &'static str,
        /// The error.
        message: String,
    },
}

/// Takes a snapshot into a folder, answering its report or why not.
pub type TakeSnapshot =
    Box<dyn Fn(&std::path::Path) -> Result<serde_json::Value, String> + Send + Sync>;

/// What the admin RPC serves: a status source, snapshots and a stop signal.
pub struct AdminContext {
    /// Produces the current status.
    pub status: Box<dyn Fn() -> Status + Send + Sync>,
    /// Takes a snapshot, when the node can (it has an index).
    pub snapshot: Option<TakeSnapshot>,
    /// Raised by the `stop` call.
    pub stop: watch::Sender<bool>,
}

/// A running admin server; the cookie and address files are removed when it is stopped.
pub struct AdminServer {
    handle: ServerHandle,
    cookie_file: std::path::PathBuf,
    addr_file: std::path::PathBuf,
    /// The address it listens on.
    pub addr: SocketAddr,
}

impl AdminServer {
    /// Writes a fresh cookie, starts the server on `addr` and records the address in the data
    /// folder. Must run inside a tokio runtime.
    pub async fn start(
        addr: SocketAddr,
        datadir: &DataDir,
        ctx: AdminContext,
    ) -> Result<Self, AdminError> {
        let password = random_hex(32);
        let cookie = format!("{COOKIE_USER}:{password}");
        datadir.write_private(&datadir.cookie_file(), cookie.as_bytes())?;
        // bitcoind's cookie scheme is HTTP basic auth with user `__cookie__`.
        #[allow(deprecated)]
        let auth =
            tower_http::validate_request::ValidateRequestHeaderLayer::basic(COOKIE_USER, &password);
        let middleware = tower::ServiceBuilder::new().layer(auth);
        let config = ServerConfig::builder()
            .max_request_body_size(64 * 1024)
            .max_response_body_size(1024 * 1024)
            .max_connections(16)
            .build();
        let server = Server::builder()
            .set_config(config)
            .set_http_middleware(middleware)
            .build(addr)
            .await
            .map_err(|e| AdminError::Listen {
                addr,
                message: e.to_string(),
            })?;
        let local = server.local_addr().map_err(|e| AdminError::Listen {
            addr,
            message: e.to_string(),
        })?;
        let mut module = RpcModule::new(Arc::new(ctx));
        // On a blocking thread: the status reads the kernel's tip, under the lock it holds while
        // it connects a block, and the free disk space.
        module
            .register_blocking_method("status", |_params, ctx, _| {
                let mut status = (ctx.status)();
                status.running = true;
                Ok::<_, ErrorObjectOwned>(status)
            })
            .map_err(|e| AdminError::Listen {
                addr,
                message: e.to_string(),
            })?;
        // On a blocking thread too: it waits for the kernel and reads every file it writes.
        module
            .register_blocking_method("snapshot", |params, ctx, _| {
                let failed = |message: String| ErrorObjectOwned::owned(-1, message, None::<()>);
                let (dir,): (std::path::PathBuf,) = params.parse()?;
                if !dir.is_absolute() {
                    return Err(failed(format!("{} is not an absolute path", dir.display())));
                }
                let take = ctx.snapshot.as_ref().ok_or_else(|| {
                    failed("this node has no index: nothing to start another from".into())
                })?;
                take(&dir).map_err(failed)
            })
            .map_err(|e| AdminError::Listen {
                addr,
                message: e.to_string(),
            })?;
        module
            .register_method("stop", |_params, ctx, _| {
                let _ = ctx.stop.send(true);
                Ok::<_, ErrorObjectOwned>("cairn stopping")
            })
            .map_err(|e| AdminError::Listen {
                addr,
                message: e.to_string(),
            })?;
        let handle = server.start(module);
        datadir.write_private(&datadir.admin_addr_file(), local.to_string().as_bytes())?;
        Ok(AdminServer {
            handle,
            cookie_file: datadir.cookie_file(),
            addr_file: datadir.admin_addr_file(),
            addr: local,
        })
    }

    /// Stops the server and removes the cookie and address files.
    pub async fn stop(self) {
        let _ = self.handle.stop();
        self.handle.stopped().await;
        let _ = std::fs::remove_file(&self.cookie_file);
        let _ = std::fs::remove_file(&self.addr_file);
    }
}

/// A client for a running cairn's admin RPC, found through its data folder.
pub struct AdminClient {
    client: HttpClient,
}

impl AdminClient {
    /// Reads the cookie and address a running cairn wrote into `datadir`; calls time out after
    /// 30 seconds.
    pub fn connect(datadir: &DataDir) -> Result<Self, AdminError> {
        Self::connect_waiting(datadir, std::time::Duration::from_secs(30))
    }

    /// As [`AdminClient::connect`], with calls that wait up to `timeout` (a snapshot's).
    pub fn connect_waiting(
        datadir: &DataDir,
        timeout: std::time::Duration,
    ) -> Result<Self, AdminError> {
        let not_running = || AdminError::NotRunning(datadir.root().display().to_string());
        let cookie = std::fs::read_to_string(datadir.cookie_file()).map_err(|_| not_running())?;
        let addr = std::fs::read_to_string(datadir.admin_addr_file()).map_err(|_| not_running())?;
        let token = base64::engine::general_purpose::STANDARD.encode(cookie.trim());
        let mut headers = HeaderMap::new();
        let value =
            HeaderValue::from_str(&format!("Basic {token}")).map_err(|e| AdminError::Call {
                method: "connect",
                message: e.to_string(),
            })?;
        headers.insert("authorization", value);
        let client = HttpClientBuilder::default()
            .set_headers(headers)
            .request_timeout(timeout)
            .build(format!("http://{}", addr.trim()))
            .map_err(|e| AdminError::Call {
                method: "connect",
                message: e.to_string(),
            })?;
        Ok(AdminClient { client })
    }

    /// Asks for the node's status.
    pub async fn status(&self) -> Result<Status, AdminError> {
        self.client
            .request("status", rpc_params![])
            .await
            .map_err(|e| AdminError::Call {
                method: "status",
                message: e.to_string(),
            })
    }

    /// Asks the node to write a snapshot into `dir` (absolute), answering its report.
    pub async fn snapshot(&self, dir: &std::path::Path) -> Result<serde_json::Value, AdminError> {
        self.client
            .request("snapshot", rpc_params![dir])
            .await
            .map_err(|e| AdminError::Call {
                method: "snapshot",
                message: match e {
                    // The node's own words, not the error object around them.
                    jsonrpsee::core::client::Error::Call(answer) => answer.message().to_string(),
                    other => other.to_string(),
                },
            })
    }

    /// Asks the node to stop.
    pub async fn stop(&self) -> Result<String, AdminError> {
        self.client
            .request("stop", rpc_params![])
            .await
            .map_err(|e| AdminError::Call {
                method: "stop",
                message: e.to_string(),
            })
    }
}

fn random_hex(bytes: usize) -> String {
    use rand::RngCore;
    let mut buf = vec![0u8; bytes];
    rand::rngs::OsRng.fill_bytes(&mut buf);
    buf.to_lower_hex_string()
}
