//! The process's signals, all received on one thread: SIGINT and SIGTERM stop cairn cleanly
//! (a second one at once), SIGUSR1 asks peers for headers, SIGHUP re-reads the TLS certificate.

use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};

/// What the process's signals asked for; one thread receives them all ([`signals`]).
#[derive(Default)]
pub struct Signals {
    /// Raised by Ctrl-C (SIGINT) or SIGTERM: long loops check it and stop cleanly.
    pub interrupted: AtomicBool,
    /// Raised by SIGUSR1: ask peers for headers now, as electrs does (test harnesses send it).
    pub sync_requested: AtomicBool,
    /// Raised by SIGHUP: re-read the TLS certificate and key.
    pub reload_requested: AtomicBool,
}

/// The signals' flags. The first call installs the handlers, before it returns, and starts the
/// thread that receives them; a second interrupt exits at once.
pub fn signals() -> Result<&'static Signals> {
    use tokio::signal::unix::{signal, SignalKind};
    static SIGNALS: std::sync::OnceLock<Signals> = std::sync::OnceLock::new();
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    let flags = SIGNALS.get_or_init(Signals::default);
    let mut result = Ok(());
    INSTALLED.call_once(|| {
        result = (|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .build()?;
            let mut streams = {
                let _entered = rt.enter();
                [
                    signal(SignalKind::interrupt())?,
                    signal(SignalKind::terminate())?,
                    signal(SignalKind::user_defined1())?,
                    signal(SignalKind::hangup())?,
                ]
            };
            std::thread::Builder::new()
                .name("signals".into())
                .spawn(move || {
                    rt.block_on(async move {
                    let [int, term, usr1, hup] = &mut streams;
                    loop {
                        tokio::select! {
                            _ = int.recv() => interrupted(flags),
                            _ = term.recv() => interrupted(flags),
                            _ = usr1.recv() => flags.sync_requested.store(true, Ordering::SeqCst),
                            _ = hup.recv() => flags.reload_requested.store(true, Ordering::SeqCst),
                        }
                    }
                })
                })?;
            anyhow::Ok(())
        })();
    });
    result.context("cannot install the signal handlers")?;
    Ok(flags)
}

/// Raises the interrupt flag; exits at once on the second interrupt.
fn interrupted(flags: &Signals) {
    if flags.interrupted.swap(true, Ordering::SeqCst) {
        eprintln!("second interrupt: exiting now");
        std::process::exit(130);
    }
    eprintln!("interrupted: stopping after the current step");
}
