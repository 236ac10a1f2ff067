//! TLS for the Electrum listeners: a certificate chain and key (the operator's, or a
//! self-signed pair cairn makes in the data dir on first start) loaded into a rustls acceptor,
//! which a reload (SIGHUP) replaces without touching the connections already open.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use bitcoin::hashes::{sha256, Hash};
use bitcoin::hex::DisplayHex;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

use crate::datadir::DataDir;

/// The self-signed certificate's file name in the network's data folder.
pub const SELF_SIGNED_CERT: &str = "electrum-tls.crt";
/// The self-signed certificate's key's file name in the network's data folder.
pub const SELF_SIGNED_KEY: &str = "electrum-tls.key";
/// Largest certificate or key file read: a chain of a few certificates is a few KiB.
const MAX_PEM_BYTES: u64 = 1 << 20;

/// Why a certificate or key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A file is not PEM of the kind expected, or holds none.
    #[error("{path}: {message}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// rustls refused the pair (a key that does not match the certificate, say).
    #[error("certificate {cert} with key {key}: {source}")]
    Rustls {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// What rustls said.
        source: rustls::Error,
    },
    /// The self-signed certificate could not be made.
    #[error("cannot make a self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// The self-signed pair could not be saved.
    #[error("cannot save the self-signed certificate: {0}")]
    Save(#[from] crate::datadir::DataDirError),
}

/// Where the certificate chain and its key are, both PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, leaf first.
    pub cert: PathBuf,
    /// The leaf's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

impl TlsFiles {
    /// The self-signed pair in `datadir`'s network folder, made there now (with the key readable
    /// by its owner only) unless both files exist already.
    pub fn self_signed(datadir: &DataDir) -> Result<Self, TlsError> {
        let files = TlsFiles {
            cert: datadir.root().join(SELF_SIGNED_CERT),
            key: datadir.root().join(SELF_SIGNED_KEY),
        };
        if files.cert.exists() && files.key.exists() {
            return Ok(files);
        }
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()])?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "cairn Electrum server");
        // Like `openssl req -x509`, which ElectrumX's documentation suggests: a self-signed CA
        // certificate with key identifiers, which OpenSSL (the Electrum wallet's Python `ssl`)
        // accepts as its own trust anchor once the wallet has saved it.
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.use_authority_key_identifier_extension = true;
        let key = rcgen::KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        // The key first: a crash before the certificate is written leaves no certificate, and
        // the next start makes a new pair.
        datadir.write_private(&files.key, key.serialize_pem().as_bytes())?;
        datadir.write_private(&files.cert, cert.pem().as_bytes())?;
        tracing::info!(
            "made a self-signed TLS certificate: {}",
            files.cert.display()
        );
        Ok(files)
    }
}

/// A loaded certificate and key, ready to accept TLS clients.
#[derive(Clone)]
pub struct Identity {
    acceptor: TlsAcceptor,
    fingerprint: String,
}

impl Identity {
    /// Reads and checks the pair: TLS 1.2 and 1.3 through rustls's ring provider.
    pub fn load(files: &TlsFiles) -> Result<Self, TlsError> {
        let chain = read_certificates(&files.cert)?;
        let key = read_key(&files.key)?;
        let fingerprint = fingerprint(&chain[0]);
        let rustls_error = |source| TlsError::Rustls {
            cert: files.cert.clone(),
            key: files.key.clone(),
            source,
        };
        let config =
            ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
                .map_err(rustls_error)?
                .with_no_client_auth()
                .with_single_cert(chain, key)
                .map_err(rustls_error)?;
        Ok(Identity {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            fingerprint,
        })
    }

    /// The leaf certificate's SHA-256, lowercase hex without separators (as the Electrum
    /// wallet's `--serverfingerprint` takes it).
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }
}

/// The TLS identity the listeners use now, and the files it is re-read from.
pub struct Tls {
    files: TlsFiles,
    current: RwLock<Identity>,
}

impl Tls {
    /// Loads `files`.
    pub fn open(files: TlsFiles) -> Result<Self, TlsError> {
        let identity = Identity::load(&files)?;
        Ok(Tls {
            files,
            current: RwLock::new(identity),
        })
    }

    /// The acceptor for the next connection.
    pub fn acceptor(&self) -> TlsAcceptor {
        self.read().acceptor.clone()
    }

    /// The current certificate's fingerprint.
    pub fn fingerprint(&self) -> String {
        self.read().fingerprint.clone()
    }

    /// The files it was loaded from.
    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// Re-reads the files: new connections get the new pair, open ones keep theirs. A pair that
    /// does not load leaves the current one in use. Returns the new fingerprint.
    pub fn reload(&self) -> Result<String, TlsError> {
        let identity = Identity::load(&self.files)?;
        let fingerprint = identity.fingerprint.clone();
        *self
            .current
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = identity;
        Ok(fingerprint)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Identity> {
        self.current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// SHA-256 of a certificate's DER, lowercase hex.
pub fn fingerprint(cert: &CertificateDer<'_>) -> String {
    sha256::Hash::hash(cert.as_ref())
        .to_byte_array()
        .to_lower_hex_string()
}

/// A file's bytes, refusing one over [`MAX_PEM_BYTES`].
fn read_bounded(path: &Path) -> Result<Vec<u8>, TlsError> {
    use std::io::Read;
    let io = |source| TlsError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .map_err(io)?
        .take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_PEM_BYTES {
        return Err(TlsError::Pem {
            path: path.to_path_buf(),
            message: format!("larger than {MAX_PEM_BYTES} bytes"),
        });
    }
    Ok(bytes)
}

/// Every certificate in a PEM file, in order; at least one.
fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read_bounded(path)?;
    let pem = |message: String| TlsError::Pem {
        path: path.to_path_buf(),
        message,
    };
    let chain = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem(format!("not a PEM certificate file: {e}")))?;
    if chain.is_empty() {
        return Err(pem("no CERTIFICATE block".into()));
    }
    Ok(chain)
}

/// The first private key in a PEM file.
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read_bounded(path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| TlsError::Pem {
        path: path.to_path_buf(),
        message: format!("no usable private key: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn datadir(tmp: &Path) -> DataDir {
        DataDir::open(tmp, crate::types::Network::Regtest, "regtest").unwrap()
    }

    #[test]
    fn self_signed_pair_is_made_once_and_loads() {
        let tmp = tempfile::tempdir().unwrap();
        let dd = datadir(tmp.path());
        let files = TlsFiles::self_signed(&dd).unwrap();
        let first = Tls::open(files.clone()).unwrap().fingerprint();
        assert_eq!(first.len(), 64);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&files.key).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "the key is private: {mode:o}");
        // Existing files are kept: the fingerprint a wallet saved stays valid.
        let again = TlsFiles::self_signed(&dd).unwrap();
        assert_eq!(Tls::open(again).unwrap().fingerprint(), first);
        // A lost certificate means a new pair.
        std::fs::remove_file(&files.cert).unwrap();
        let fresh = TlsFiles::self_signed(&dd).unwrap();
        assert_ne!(Tls::open(fresh).unwrap().fingerprint(), first);
    }

    #[test]
    fn bad_files_are_refused_and_a_failed_reload_keeps_the_pair() {
        let tmp = tempfile::tempdir().unwrap();
        let dd = datadir(tmp.path());
        let files = TlsFiles::self_signed(&dd).unwrap();
        let tls = Tls::open(files.clone()).unwrap();
        let before = tls.fingerprint();
        let key = std::fs::read(&files.key).unwrap();
        // Garbage, an empty file, a key where the certificate belongs, a huge file.
        for (cert, what) in [
            (b"garbage".to_vec(), "CERTIFICATE"),
            (Vec::new(), "CERTIFICATE"),
            (key.clone(), "CERTIFICATE"),
            (vec![b'A'; (MAX_PEM_BYTES + 1) as usize], "larger than"),
        ] {
            std::fs::write(&files.cert, &cert).unwrap();
            let err = tls.reload().expect_err("refused").to_string();
            assert!(err.contains(what), "{err}");
            assert_eq!(tls.fingerprint(), before);
        }
        // A key that is not the certificate's.
        let other = tempfile::tempdir().unwrap();
        let other_files = TlsFiles::self_signed(&datadir(other.path())).unwrap();
        std::fs::copy(&other_files.cert, &files.cert).unwrap();
        assert!(tls.reload().is_err());
        // The other pair whole: taken.
        std::fs::copy(&other_files.key, &files.key).unwrap();
        let after = tls.reload().unwrap();
        assert_ne!(after, before);
        assert_eq!(after, Tls::open(other_files).unwrap().fingerprint());
    }
}
