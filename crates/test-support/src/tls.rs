//! Certificates for the TLS tests, made with the `openssl` command line as an operator would:
//! a test CA, a server certificate it signs for `127.0.0.1` and `localhost`, one it signs for
//! another host name only, and a second CA that signed none of them. Removed on drop.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A directory of test certificates.
pub struct TestPki {
    dir: PathBuf,
}

impl TestPki {
    /// Makes the CAs and the server certificates (EC P-256, valid for two days).
    pub fn new() -> Self {
        crate::needs::needs(crate::needs::Service::Openssl);
        let dir = std::env::temp_dir().join(format!("pki-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let pki = Self { dir };
        pki.ca("ca", "goods test CA");
        pki.ca("other-ca", "a CA nobody trusts here");
        pki.sign("server", "subjectAltName=IP:127.0.0.1,DNS:localhost");
        pki.sign("elsewhere", "subjectAltName=DNS:db.elsewhere.example");
        pki
    }

    fn openssl(&self, args: &[&str]) {
        let out = Command::new("openssl")
            .current_dir(&self.dir)
            .args(args)
            .output()
            .expect("openssl must be installed for the TLS tests (apt-get install openssl)");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn ca(&self, name: &str, subject: &str) {
        self.openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN={subject}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.pem"),
        ]);
    }

    fn sign(&self, name: &str, san: &str) {
        self.openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            "/CN=goods test server",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
        ]);
        std::fs::write(self.dir.join(format!("{name}.ext")), san).unwrap();
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &format!("{name}.ext"),
            "-out",
            &format!("{name}.pem"),
        ]);
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The CA that signed the server certificates.
    pub fn ca_pem(&self) -> PathBuf {
        self.file("ca.pem")
    }

    /// A CA that signed nothing here: verifying against it must fail.
    pub fn other_ca_pem(&self) -> PathBuf {
        self.file("other-ca.pem")
    }

    /// The server certificate for `127.0.0.1` and `localhost`, and its key.
    pub fn server(&self) -> (PathBuf, PathBuf) {
        (self.file("server.pem"), self.file("server.key"))
    }

    /// A server certificate the same CA signed for another host name only, and its key.
    pub fn elsewhere(&self) -> (PathBuf, PathBuf) {
        (self.file("elsewhere.pem"), self.file("elsewhere.key"))
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Default for TestPki {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TestPki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
